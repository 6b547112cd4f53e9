"""pytest fixtures for tests with real processes: ``aeron_dir`` and ``process_manager``.

Enable with ``pytest_plugins = ["harness.pytest_plugin"]`` in the top conftest. Teardown always runs:
the aeron dir is removed and every child process group is SIGKILLed and reaped, pass or fail. When a
test fails, the tail of each child's stdout/stderr is attached to its report (section
"aeron child processes (stdout/stderr)"), so a CI log shows what the driver and clients said.
"""

from __future__ import annotations

import pytest

from harness.aeron_dirs import new_aeron_dir, remove_aeron_dir
from harness.process_manager import ProcessManager

_MANAGER_KEY = pytest.StashKey[ProcessManager]()
_TAIL_LINES = 40


@pytest.fixture
def aeron_dir(request):
    """A unique, empty directory under /dev/shm for this test's driver; removed at teardown even on failure."""
    name = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40]
    path = new_aeron_dir(f"aeron-{name}")
    try:
        yield path
    finally:
        remove_aeron_dir(path)


@pytest.fixture
def process_manager(request, tmp_path):
    """A ``ProcessManager`` logging under ``tmp_path/processes``; kills and reaps every child at teardown."""
    manager = ProcessManager(tmp_path / "processes")
    request.node.stash[_MANAGER_KEY] = manager
    try:
        yield manager
    finally:
        manager.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    # setup/call reports are made before fixture teardown: the children's logs are all still there.
    if report.failed and report.when in ("setup", "call"):
        manager = item.stash.get(_MANAGER_KEY, None)
        if manager is not None and manager.processes:
            report.sections.append(("aeron child processes (stdout/stderr)", manager.tails(_TAIL_LINES)))
