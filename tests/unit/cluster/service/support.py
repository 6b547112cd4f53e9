"""A consensus module played by a test, over the scripted IPC driver of ``tests/unit/client_support.py``: the
counters a container waits for, the service stream (ServiceProxy), the consensus module stream it reads acks and
requests from, a log publication (LogPublisher) and the commit position. The agent under test runs in the test's
thread, its ``do_work`` called by ``await_condition``."""

from __future__ import annotations

import struct

from aeron_numba.agent import NoOpIdleStrategy
from aeron_numba.client import FragmentAssembler
from aeron_numba.cluster import recovery_state
from aeron_numba.cluster.context import ClusteredServiceContext
from aeron_numba.cluster.service.clustered_service import ClusteredServiceBase
from aeron_numba.cluster.service.clustered_service_agent import ClusteredServiceAgent
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.codecs.cluster_proxies import LogPublisher, ServiceProxy
from aeron_numba.layout import cluster as C
from aeron_numba.layout.bits import NULL_VALUE
from harness.awaiting import NotYet, await_condition

CLUSTER_ID = 0
SERVICE_ID = 0
LOG_CHANNEL = "aeron:ipc?term-length=64k"
LOG_STREAM_ID = 100


class RecordingService(ClusteredServiceBase):
    """Records every callback as a tuple, in order."""

    def __init__(self):
        self.events: list[tuple] = []
        self.cluster = None
        self.on_role_change_action = None

    def on_start(self, cluster, snapshot_image):
        self.cluster = cluster
        self.events.append(("start", snapshot_image))

    def on_session_open(self, session, timestamp):
        self.events.append(("open", session.id, timestamp, session.response_channel, session.encoded_principal))

    def on_session_close(self, session, timestamp, close_reason):
        self.events.append(("close", session.id, timestamp, close_reason))

    def on_session_message(self, session, timestamp, buffer, offset, length, header):
        self.events.append(("message", session.id if session is not None else None, timestamp,
                            bytes(buffer[offset:offset + length]), self.cluster.log_position()))

    def on_timer_event(self, correlation_id, timestamp):
        self.events.append(("timer", correlation_id, timestamp))

    def on_role_change(self, new_role):
        self.events.append(("role", new_role))
        if self.on_role_change_action is not None:
            self.on_role_change_action()

    def on_terminate(self, cluster):
        self.events.append(("terminate",))

    def on_new_leadership_term_event(self, leadership_term_id, log_position, timestamp, term_base_log_position,
                                     leader_member_id, log_session_id, time_unit, app_version):
        self.events.append(("new_term", leadership_term_id, log_position, timestamp, time_unit))


class Clock:
    """A nano clock that moves 2 ms a reading, so every duty cycle is a slow tick."""

    def __init__(self):
        self.now_ns = 0

    def __call__(self) -> int:
        self.now_ns += 2_000_000
        return self.now_ns


class ConsensusModuleStandIn:
    """What the container waits for and talks to (see the module docstring)."""

    def __init__(self, aeron, *, log_position=0, timestamp=0, leadership_term_id=NULL_VALUE,
                 snapshot_recording_id=NULL_VALUE):
        self.aeron = aeron
        key = struct.pack("<i", CLUSTER_ID)
        self.commit_position = aeron.add_counter(C.COMMIT_POSITION_TYPE_ID, key,
                                                 f"Cluster commit-pos: - clusterId={CLUSTER_ID}")
        self.recovery = recovery_state.allocate(aeron, leadership_term_id, log_position, timestamp, CLUSTER_ID,
                                                [snapshot_recording_id])
        ctx = ClusteredServiceContext()
        self.service_proxy = ServiceProxy(aeron.add_publication(ctx.control_channel, ctx.service_stream_id))
        self.from_service = aeron.add_subscription(ctx.control_channel, ctx.consensus_module_stream_id)
        self.log_publication = aeron.add_exclusive_publication(LOG_CHANNEL, LOG_STREAM_ID)
        self.log = LogPublisher(self.log_publication)
        self.received: list = []
        self._assembler = FragmentAssembler(self._on_fragment)

    def _on_fragment(self, buffer, offset, length, header):
        self.received.append(CLUSTER.decode(buffer, offset, length))

    def poll(self) -> int:
        return self.from_service.poll(self._assembler.on_fragment, 10)

    def messages(self, name: str) -> list:
        self.poll()
        return [m for m in self.received if m.SPEC.name == name]

    def join_log(self, role=C.ClusterRole.LEADER, log_position=0, max_log_position=(1 << 63) - 1, member_id=0,
                 is_startup=False) -> None:
        assert self.service_proxy.join_log(log_position, max_log_position, member_id,
                                           self.log_publication.session_id, LOG_STREAM_ID, int(is_startup), int(role),
                                           LOG_CHANNEL)

    def commit(self, position: int | None = None) -> int:
        position = self.log_publication.position if position is None else position
        self.commit_position.set(position)
        return position


def make_agent(aeron, service, *, errors=None, archive_connect=None, **ctx_overrides) -> ClusteredServiceAgent:
    ctx = ClusteredServiceContext(**ctx_overrides).conclude()
    errors = errors if errors is not None else []
    return ClusteredServiceAgent(ctx, service, aeron, error_handler=errors.append,
                                 archive_connect=archive_connect or (lambda: None),
                                 idle_strategy=NoOpIdleStrategy(), nano_clock=Clock(), epoch_clock_ms=lambda: 0)


def run_until(agent, condition, description: str, timeout_s: float = 10.0):
    return await_condition(lambda: condition() or NotYet(description), timeout_s, description, work=agent.do_work)
