"""harness: real processes for integration, stress and chaos tests (see DESIGN.md).

- ``processes``: spawn Python worker functions (multiprocessing, spawn method) for stress tests.
- ``process_manager``: run driver/client scripts as real processes; kill, pause/resume, capture output.
- ``awaiting``: ``await_condition`` with a deadline and a useful timeout message.
- ``aeron_dirs``: unique aeron dirs, ``await_cnc_ready``, counters of a running driver.
- ``pytest_plugin``: the ``aeron_dir`` and ``process_manager`` fixtures.
"""
