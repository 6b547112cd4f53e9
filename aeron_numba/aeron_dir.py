"""Where the driver's directory is (spec/transport.md §13): one rule shared by the driver, clients and tools.

An explicit directory wins, then the ``AERON_DIR`` environment variable (Aeron's ``aeron.dir``), then the
default: ``/dev/shm/aeron-<user>`` on Linux when ``/dev/shm`` exists, ``<tempdir>/aeron-<user>``
elsewhere. The user is ``$USER``, else the passwd entry of the current uid, else ``default``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Mapping

AERON_DIR_ENV = "AERON_DIR"
AERON_DIR_PREFIX = "aeron-"
DEFAULT_USER_NAME = "default"
_LINUX_SHM_DIR = Path("/dev/shm")


def _user_name(environ: Mapping[str, str]) -> str:
    user = environ.get("USER")
    if user:
        return user
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name or DEFAULT_USER_NAME
    except (ImportError, KeyError, AttributeError):  # no pwd module (Windows) or uid not in passwd
        return DEFAULT_USER_NAME


def default_aeron_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``/dev/shm/aeron-<user>`` on Linux, ``<tempdir>/aeron-<user>`` elsewhere (§13)."""
    environ = os.environ if environ is None else environ
    name = AERON_DIR_PREFIX + _user_name(environ)
    if sys.platform.startswith("linux") and _LINUX_SHM_DIR.is_dir():
        return _LINUX_SHM_DIR / name
    return Path(tempfile.gettempdir()) / name


def resolve_aeron_dir(explicit: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """``explicit`` if given (non-empty), else ``$AERON_DIR`` (non-empty), else ``default_aeron_dir()``."""
    environ = os.environ if environ is None else environ
    if explicit is not None and str(explicit) != "":
        return Path(explicit)
    from_env = environ.get(AERON_DIR_ENV)
    if from_env:
        return Path(from_env)
    return default_aeron_dir(environ)
