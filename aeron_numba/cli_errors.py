"""One line for an error a user caused at a command line: what went wrong, with which path or value, and what
to do, instead of a traceback. Shared by the entry points (driver, archive, benchmarks, chaos).

An operating-system error from creating a directory or a file is the user's (a bad ``--dir`` or ``--out``,
a full or read-only file system), so the entry points catch ``OSError`` where they set up and print
``user_error_line`` of it; a bug still shows its traceback.
"""

from __future__ import annotations

import errno
import os
import sys

# What to do about each cause a user can fix, by errno.
_ADVICE = {
    errno.ENOENT: "a parent directory is missing or cannot hold directories: choose a path under a directory "
                  "you can write",
    errno.ENOTDIR: "a part of the path is a file, not a directory: choose another path",
    errno.EEXIST: "something else is in the way: remove it or choose another path",
    errno.EISDIR: "it is a directory: choose a file path",
    errno.EACCES: "permission denied: choose a directory you can write, or change its permissions",
    errno.EPERM: "not permitted: choose a directory you can write",
    errno.EROFS: "the file system is read-only: choose a path on a writable file system",
    errno.ENOSPC: "no space left on the device: free some space or choose a larger file system",
    errno.EDQUOT: "disk quota exceeded: free some space or choose another file system",
    errno.EFBIG: "the file is larger than this process may write (ulimit -f) or the file system allows: "
                 "raise the limit or choose another file system",
    errno.ENAMETOOLONG: "the path is too long: choose a shorter one",
}


def user_error_line(exc: OSError, what: str) -> str:
    """``cannot create <what> <path>: <strerror>; <advice>`` for an ``OSError`` raised while setting up.

    An error without a file name (``MappedFile.create`` words its own, naming the file) keeps its text.
    """
    reason = exc.strerror or str(exc)
    advice = _ADVICE.get(exc.errno)
    line = reason if exc.filename is None else f"cannot create {what} {os.fsdecode(exc.filename)}: {reason}"
    return line + (f"; {advice}" if advice else "")


def fail(prog: str, message: str, exit_code: int = 1) -> int:
    """Print ``prog: message`` to stderr and return the exit code for ``main`` to return."""
    print(f"{prog}: {message}", file=sys.stderr, flush=True)
    return exit_code
