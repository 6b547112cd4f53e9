"""Fixtures of the client's unit tests."""

from __future__ import annotations

import pytest

from tests.unit.client_support import FakeDriver, connect


@pytest.fixture
def driver(shm_dir):
    """A fake driver (``tests/unit/client_support.FakeDriver``) serving a fresh aeron dir on its own thread."""
    with FakeDriver(shm_dir / "aeron") as fake:
        yield fake


@pytest.fixture
def client(driver):
    """A client of ``driver`` with no resource linger, and the errors its handler got (none, checked at the end)."""
    aeron, errors = connect(driver, resource_linger_duration_ns=0)
    yield aeron, errors
    aeron.close()
    assert errors == []
