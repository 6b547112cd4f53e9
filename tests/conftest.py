import os
import shutil
import uuid
from pathlib import Path

import pytest

pytest_plugins = ["harness.pytest_plugin"]

SHM_ROOT = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path("/tmp")


@pytest.fixture
def shm_dir():
    """A unique directory in /dev/shm for one test, removed afterwards even when the test fails."""
    path = SHM_ROOT / f"aeron-numba-test-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """With NUMBA_DISABLE_JIT=1 (coverage/debug runs) the atomics are plain numpy loads and stores, so
    tests of cross-process atomicity cannot hold: skip the ``stress`` and ``requires_jit`` ones, saying why."""
    import numba

    if not numba.config.DISABLE_JIT:
        return
    skip = pytest.mark.skip(reason="needs compiled atomics; NUMBA_DISABLE_JIT=1 makes them plain loads/stores")
    for item in items:
        if "stress" in item.keywords or "requires_jit" in item.keywords:
            item.add_marker(skip)
