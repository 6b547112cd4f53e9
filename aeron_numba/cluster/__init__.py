"""Aeron Cluster (issue 19). Built so far: the cluster directory's files, byte-compatible with Aeron 1.48's --
``recording_log`` (with ``recovery_plan`` and ``term_index``), ``node_state_file``, ``mark_file`` -- and
``consensus_module_snapshot``, which reads a snapshot's messages. The consensus module, elections, service
containers and the cluster client come later."""
