import os
import shutil
import uuid
from pathlib import Path

import pytest

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
