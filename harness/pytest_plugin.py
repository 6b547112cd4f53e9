"""pytest fixtures for tests with real processes: ``aeron_dir``, ``process_manager``, and ``cluster`` /
``cluster_factory`` (an N-member cluster on this machine, ``harness/cluster.py``).

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


@pytest.fixture
def cluster_factory(request, process_manager):
    """``cluster_factory(member_count=3, service=..., env=...)``: a ``ClusterHarness`` (not started) logging through
    ``process_manager``; every one made is closed at teardown (processes killed, dirs removed) even on failure."""
    from harness.cluster import ClusterHarness

    made = []

    def make(**kwargs):
        kwargs.setdefault("name", request.node.name)
        harness = ClusterHarness(process_manager, **kwargs)
        made.append(harness)
        return harness

    try:
        yield make
    finally:
        errors = []
        for harness in made:
            try:
                harness.close()
            except Exception as exc:  # close every one
                errors.append(exc)
        if errors:
            raise errors[0]


@pytest.fixture
def cluster(cluster_factory):
    """A 3-member ``ClusterHarness`` (not started: call ``cluster.start()``), closed at teardown."""
    return cluster_factory()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    # setup/call reports are made before fixture teardown: the children's logs are all still there.
    if report.failed and report.when in ("setup", "call"):
        manager = item.stash.get(_MANAGER_KEY, None)
        if manager is not None and manager.processes:
            report.sections.append(("aeron child processes (stdout/stderr)", manager.tails(_TAIL_LINES)))
