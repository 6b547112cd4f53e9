"""Services the real-process tests run in a container process (``--service tests.integration.cluster.services:X``)."""

from __future__ import annotations

from aeron_numba.cluster.service import ClusteredServiceBase
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED


class TimerService(ClusteredServiceBase):
    """``schedule:<id>:<deadline>`` schedules a timer, ``cancel:<id>`` cancels one; a timer event is answered to
    every session as ``fired:<id>:<timestamp>``."""

    def on_start(self, cluster, snapshot_image):
        self.cluster = cluster

    def on_session_message(self, session, timestamp, buffer, offset, length, header):
        command, _, rest = bytes(buffer[offset:offset + length]).decode("ascii").partition(":")
        if command == "schedule":
            correlation_id, deadline = (int(x) for x in rest.split(":"))
            while not self.cluster.schedule_timer(correlation_id, deadline):
                self.cluster.idle()
        elif command == "cancel":
            while not self.cluster.cancel_timer(int(rest)):
                self.cluster.idle()

    def on_timer_event(self, correlation_id, timestamp):
        for session in self.cluster.client_sessions():
            while session.offer(f"fired:{correlation_id}:{timestamp}".encode()) in (BACK_PRESSURED, ADMIN_ACTION):
                self.cluster.idle()
