"""Aeron Cluster (issue 19). Built so far: the cluster directory's files, byte-compatible with Aeron 1.48's --
``recording_log`` (with ``recovery_plan`` and ``term_index``), ``node_state_file``, ``mark_file`` -- and
``consensus_module_snapshot``, which reads a snapshot's messages; the election state machine (``election``, with
the member list and quorum arithmetic in ``cluster_member``), driven by a consensus module through its
``ElectionHost`` protocol; the settings of the consensus module, the service containers and the cluster client
(``context``); the consensus module's timers (``timer_service`` over the ``timer_wheel``) and the cluster's time
unit (``cluster_time``). The consensus module, service containers and the cluster client come later."""
