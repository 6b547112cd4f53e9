"""Fixtures shared by the cluster's unit tests."""

from __future__ import annotations

import pytest

from tests.unit.client_support import FakeDriver, connect


@pytest.fixture
def aeron(tmp_path):
    """An Aeron client of the scripted driver (``client_support.FakeDriver``): real IPC logs, no driver process."""
    driver = FakeDriver(tmp_path / "aeron")
    client, _ = connect(driver)
    yield client
    client.close()
    driver.close()
