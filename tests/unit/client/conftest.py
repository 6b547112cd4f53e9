"""Fixtures of the client's unit tests."""

from __future__ import annotations

import pytest

from tests.unit.client_support import FakeDriver


@pytest.fixture
def driver(shm_dir):
    """A fake driver (``tests/unit/client_support.FakeDriver``) serving a fresh aeron dir on its own thread."""
    with FakeDriver(shm_dir / "aeron") as fake:
        yield fake
