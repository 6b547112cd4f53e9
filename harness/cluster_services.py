"""Clustered services for tests: the example key-value store with its state where a test can read it.

``KeyValueProbeService`` is ``aeron_numba.cluster.examples.key_value_service.KeyValueService`` that also keeps three
counters in its node's ``cnc.dat`` (allocated through the container's Aeron client when it starts): how many
requests it has applied, its state hash (the CRC-32 chained over every applied request and status, so two members
with equal hashes applied the same requests in the same order) and the log position after the last request it
applied. ``ClusterNode.service_state()`` reads them; a restarted member starts them from its snapshot's values.

The position is written last, and a reader takes the three between two equal readings of it.

Timers: a PUT of key ``timer`` whose value is ``schedule:<correlation id>:<delay ms>`` or ``cancel:<correlation id>``
is applied to the store like any PUT and also schedules (``cluster.schedule_timer``, deadline ``cluster.time()`` +
delay in the cluster's milliseconds) or cancels a timer. Fired timers are counted in two more counters: how many
fired and the sum of their correlation ids (equal on every member when each fired once).
"""

from __future__ import annotations

import struct

from aeron_numba.cluster.examples.key_value_service import KeyValueService

#: Counter type ids of the probe (user counters: outside Aeron's own ranges).
APPLIED_TYPE_ID = 9101
STATE_HASH_TYPE_ID = 9102
LOG_POSITION_TYPE_ID = 9103
TIMERS_FIRED_TYPE_ID = 9104
TIMERS_FIRED_SUM_TYPE_ID = 9105
TIMER_KEY = b"timer"


def timer_command(action: str, correlation_id: int, delay_ms: int = 0) -> bytes:
    """The value of a PUT of ``TIMER_KEY`` that schedules or cancels a timer."""
    if action == "schedule":
        return f"schedule:{correlation_id}:{delay_ms}".encode()
    if action == "cancel":
        return f"cancel:{correlation_id}".encode()
    raise ValueError(f"action={action!r} must be 'schedule' or 'cancel'")


class KeyValueProbeService(KeyValueService):
    """The key-value store, its applied count, state hash and log position in counters."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._counters = None
        self._timer_counters = None
        self.timers_fired = 0
        self.timers_fired_sum = 0

    def on_start(self, cluster, snapshot_image) -> None:
        super().on_start(cluster, snapshot_image)
        aeron = cluster.aeron
        service_id = cluster.ctx.service_id
        key = struct.pack("<i", service_id)
        self._counters = tuple(aeron.add_counter(type_id, key, f"kv-probe {name} - serviceId={service_id}")
                               for type_id, name in ((APPLIED_TYPE_ID, "applied"), (STATE_HASH_TYPE_ID, "state hash"),
                                                     (LOG_POSITION_TYPE_ID, "log position")))
        self._timer_counters = tuple(aeron.add_counter(type_id, key, f"kv-probe {name} - serviceId={service_id}")
                                     for type_id, name in ((TIMERS_FIRED_TYPE_ID, "timers fired"),
                                                           (TIMERS_FIRED_SUM_TYPE_ID, "timers fired sum")))
        self._publish()

    def on_session_message(self, session, timestamp, buffer, offset, length, header) -> None:
        request = bytes(buffer[offset:offset + length])
        super().on_session_message(session, timestamp, buffer, offset, length, header)
        self._timer_request(request)
        self._publish()

    def _timer_request(self, request: bytes) -> None:
        from aeron_numba.cluster.examples.key_value_service import PUT, decode_request

        try:
            op, _, key, value = decode_request(request)
        except ValueError:  # not a well-formed request: the store answered INVALID
            return
        if op != PUT or key != TIMER_KEY:
            return
        parts = value.decode("ascii", errors="replace").split(":")
        if parts[0] == "schedule" and len(parts) == 3:
            self.cluster.schedule_timer(int(parts[1]), self.cluster.time() + int(parts[2]))
        elif parts[0] == "cancel" and len(parts) == 2:
            self.cluster.cancel_timer(int(parts[1]))

    def on_timer_event(self, correlation_id: int, timestamp: int) -> None:
        self.timers_fired += 1
        self.timers_fired_sum += correlation_id
        if self._timer_counters is not None:
            self._timer_counters[0].set(self.timers_fired)
            self._timer_counters[1].set(self.timers_fired_sum)

    def _publish(self) -> None:
        if self._counters is None:
            return
        applied, state_hash, position = self._counters
        applied.set(self.applied)
        state_hash.set(self.state_hash)
        position.set(self.cluster.log_position())
