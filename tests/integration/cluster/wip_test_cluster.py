"""WORK IN PROGRESS, not collected (its name does not match test_*.py): the tests of Aeron's ClusterTest list
(issue 19) that do not yet pass against the consensus module, service container and client of their branches.
Each is moved to ``test_cluster.py`` once it passes for real. Run them by naming the file:

    pytest -m slow tests/integration/cluster/wip_test_cluster.py -k <name>

None is left here today: the snapshot and recovery tests were the last, and pass now (``test_cluster.py``). The
golden run's recording-log history waits in ``wip_test_cluster_history.py``.
"""
