"""Clustered services for tests: the example key-value store with its state where a test can read it.

``KeyValueProbeService`` is ``aeron_numba.cluster.examples.key_value_service.KeyValueService`` that also keeps three
counters in its node's ``cnc.dat`` (allocated through the container's Aeron client when it starts): how many
requests it has applied, its state hash (the CRC-32 chained over every applied request and status, so two members
with equal hashes applied the same requests in the same order) and the log position after the last request it
applied. ``ClusterNode.service_state()`` reads them; a restarted member starts them from its snapshot's values.

The position is written last, and a reader takes the three between two equal readings of it.
"""

from __future__ import annotations

import struct

from aeron_numba.cluster.examples.key_value_service import KeyValueService

#: Counter type ids of the probe (user counters: outside Aeron's own ranges).
APPLIED_TYPE_ID = 9101
STATE_HASH_TYPE_ID = 9102
LOG_POSITION_TYPE_ID = 9103


class KeyValueProbeService(KeyValueService):
    """The key-value store, its applied count, state hash and log position in counters."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._counters = None

    def on_start(self, cluster, snapshot_image) -> None:
        super().on_start(cluster, snapshot_image)
        aeron = cluster.aeron
        service_id = cluster.ctx.service_id
        key = struct.pack("<i", service_id)
        self._counters = tuple(aeron.add_counter(type_id, key, f"kv-probe {name} - serviceId={service_id}")
                               for type_id, name in ((APPLIED_TYPE_ID, "applied"), (STATE_HASH_TYPE_ID, "state hash"),
                                                     (LOG_POSITION_TYPE_ID, "log position")))
        self._publish()

    def on_session_message(self, session, timestamp, buffer, offset, length, header) -> None:
        super().on_session_message(session, timestamp, buffer, offset, length, header)
        self._publish()

    def _publish(self) -> None:
        if self._counters is None:
            return
        applied, state_hash, position = self._counters
        applied.set(self.applied)
        state_hash.set(self.state_hash)
        position.set(self.cluster.log_position())
