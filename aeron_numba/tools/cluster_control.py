"""Aeron's ClusterControl from outside a node: find the cluster's counters (spec/cluster.md §10) in the node's
``cnc.dat`` and flip its control toggle (counter 202) as ClusterTool does, and ask the consensus module who its
members are (ClusterMembersQuery on its stream 105, the answer on the service stream 104), as Aeron's
ClusterToolOperator.queryClusterMembers does.

The toggle is a compare-and-set from NEUTRAL to the action (RESUME goes from SUSPEND); the consensus module acts on
it and puts NEUTRAL back, which is how a tool knows the action is done. Counters are found by type id and the
cluster id in their key (Aeron's ClusterCounters.find), so two clusters sharing a driver are told apart.

A counter reader is enough for the toggle and the node's role; the members query needs an Aeron client, because the
consensus module answers on a publication.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field

from aeron_numba.cluster.cluster_error import ClusterError
from aeron_numba.layout import cluster as C
from aeron_numba.layout.counters import COUNTER_LENGTH, COUNTER_VALUE_OFFSET

_CLUSTER_ID_KEY = struct.Struct("<i")
#: Aeron's BooleanType.TRUE: ClusterTool always asks for the extended response.
EXTENDED = 1


def find_cluster_counter(reader, type_id: int, cluster_id: int):
    """The first allocated counter of ``type_id`` whose key starts with ``cluster_id`` (Aeron's
    ClusterCounters.find), as a ``CounterInfo``, or None."""
    for info in reader.for_each():
        if info.type_id == type_id and len(info.key) >= C.CLUSTER_ID_KEY_LENGTH and \
                _CLUSTER_ID_KEY.unpack_from(info.key, C.CLUSTER_ID_KEY_OFFSET)[0] == cluster_id:
            return info
    return None


def toggle_state(value: int) -> C.ClusterControlToggle:
    """The toggle's value as a state; ``ClusterError`` for a value outside Aeron's states (as ToggleState.get)."""
    try:
        return C.ClusterControlToggle(value)
    except ValueError:
        raise ClusterError(f"invalid toggle value: {value}") from None


def _value_offset(counter_id: int) -> int:
    return counter_id * COUNTER_LENGTH + COUNTER_VALUE_OFFSET


def read_toggle(values_buffer, counter_id: int) -> C.ClusterControlToggle:
    from aeron_numba.kernels import atomics_for_python

    return toggle_state(int(atomics_for_python.get_int64_acquire(values_buffer, _value_offset(counter_id))))


def apply_toggle(values_buffer, counter_id: int, target: C.ClusterControlToggle) -> bool:
    """Aeron's ToggleState.toggle: compare-and-set NEUTRAL -> ``target`` (SUSPEND -> RESUME for a resume); False
    if the toggle held something else (another action under way, or the module not accepting any)."""
    from aeron_numba.kernels import atomics_for_python

    offset = _value_offset(counter_id)
    T = C.ClusterControlToggle
    # plain ints: the compiled compare-and-set takes no enum
    if target == T.RESUME and atomics_for_python.get_int64_acquire(values_buffer, offset) == T.SUSPEND:
        return bool(atomics_for_python.compare_and_set_int64(values_buffer, offset, int(T.SUSPEND), int(T.RESUME)))
    return bool(atomics_for_python.compare_and_set_int64(values_buffer, offset, int(T.NEUTRAL), int(target)))


# ------------------------------------------------------------------------------------------ members query
@dataclass
class MemberInfo:
    """One member in a ClusterMembersExtendedResponse."""
    id: int
    ingress_endpoint: str
    consensus_endpoint: str
    log_endpoint: str
    catchup_endpoint: str
    archive_endpoint: str
    leadership_term_id: int
    log_position: int
    time_of_last_append_ns: int
    is_leader: bool = False

    @property
    def endpoints(self) -> str:
        return ",".join((self.ingress_endpoint, self.consensus_endpoint, self.log_endpoint, self.catchup_endpoint,
                         self.archive_endpoint))

    def __str__(self) -> str:
        # Aeron's ClusterMember.toString of a member built by ClusterControlAdapter (the rest at their defaults).
        return (f"ClusterMember{{id={self.id}, isBallotSent=false, isLeader={str(self.is_leader).lower()}, "
                f"leadershipTermId={self.leadership_term_id}, logPosition={self.log_position}, candidateTermId=-1, "
                f"catchupReplaySessionId=-1, correlationId=-1, timeOfLastAppendPositionNs="
                f"{self.time_of_last_append_ns}, ingressEndpoint='{self.ingress_endpoint}', "
                f"consensusEndpoint='{self.consensus_endpoint}', logEndpoint='{self.log_endpoint}', "
                f"catchupEndpoint='{self.catchup_endpoint}', archiveEndpoint='{self.archive_endpoint}', "
                f"endpoints='{self.endpoints}', publication=null, vote=null}}")


@dataclass
class ClusterMembership:
    """What a members query learnt (Aeron's ClusterMembership)."""
    current_time_ns: int = -1
    leader_member_id: int = -1
    member_id: int = -1
    active_members: list[MemberInfo] = field(default_factory=list)
    passive_members: list[MemberInfo] = field(default_factory=list)
    active_members_str: str = ""
    passive_members_str: str = ""

    def __str__(self) -> str:
        def listed(members):
            return "[" + ", ".join(map(str, members)) + "]"

        return (f"currentTimeNs={self.current_time_ns}, leaderMemberId={self.leader_member_id}, "
                f"memberId={self.member_id}, activeMembers={listed(self.active_members)}, "
                f"passiveMembers={listed(self.passive_members)}")


class ClusterControlAdapter:
    """Listener of the service stream for a members query (Aeron's ClusterControlAdapter): takes the responses to
    ``correlation_id``; what the consensus module sends its services on the same stream is passed over."""

    def __init__(self, correlation_id: int, membership: ClusterMembership):
        self.correlation_id = correlation_id
        self.membership = membership
        self.answered = False

    def on_cluster_members_response(self, correlation_id, leader_member_id, active_members, passive_followers):
        if correlation_id == self.correlation_id:
            m = self.membership
            m.leader_member_id, m.active_members_str, m.passive_members_str = (leader_member_id, active_members,
                                                                               passive_followers)
            self.answered = True

    def on_cluster_members_extended_response(self, correlation_id, current_time_ns, leader_member_id, member_id,
                                             active_members, passive_members):
        if correlation_id != self.correlation_id:
            return
        m = self.membership
        m.current_time_ns, m.leader_member_id, m.member_id = current_time_ns, leader_member_id, member_id
        m.active_members = [_member_info(entry, leader_member_id) for entry in active_members]
        m.passive_members = [_member_info(entry, leader_member_id) for entry in passive_members]
        m.active_members_str = "|".join(f"{i.id},{i.endpoints}" for i in m.active_members)
        m.passive_members_str = "|".join(f"{i.id},{i.endpoints}" for i in m.passive_members)
        self.answered = True

    # The consensus module's messages to its services, on the same stream: not for a tool.
    def on_join_log(self, **fields) -> None:
        pass

    def on_service_termination_position(self, **fields) -> None:
        pass

    def on_request_service_ack(self, **fields) -> None:
        pass


def _member_info(entry, leader_member_id: int) -> MemberInfo:
    get = entry.get if isinstance(entry, dict) else lambda name: getattr(entry, name)
    return MemberInfo(id=get("member_id"), ingress_endpoint=get("ingress_endpoint"),
                      consensus_endpoint=get("consensus_endpoint"), log_endpoint=get("log_endpoint"),
                      catchup_endpoint=get("catchup_endpoint"), archive_endpoint=get("archive_endpoint"),
                      leadership_term_id=get("leadership_term_id"), log_position=get("log_position"),
                      time_of_last_append_ns=get("time_of_last_append_ns"),
                      is_leader=get("member_id") == leader_member_id)


def query_cluster_members(aeron_dir: str, control_channel: str, consensus_module_stream_id: int,
                          service_stream_id: int, timeout_ms: int) -> ClusterMembership | None:
    """Send a ClusterMembersQuery to the node's consensus module and wait up to ``timeout_ms`` for its answer; None
    if none came in time (Aeron's queryClusterMembers, which reports a timeout as success, is not followed)."""
    from aeron_numba.client import Aeron, Context
    from aeron_numba.codecs.cluster_messages import CLUSTER, TO_SERVICE
    from aeron_numba.codecs.cluster_proxies import ConsensusModuleProxy
    from aeron_numba.codecs.sbe_adapter import SbeAdapter

    membership = ClusterMembership()
    with Aeron.connect(Context(aeron_dir=aeron_dir, client_name="cluster-tool")) as aeron:
        publication = aeron.add_publication(control_channel, consensus_module_stream_id)
        subscription = aeron.add_subscription(control_channel, service_stream_id)
        # As Aeron's: the timeout is the node's time to answer, from when the client and its streams exist (our
        # client's start alone, loading its kernels, can take more than the 1 s the toggle commands allow).
        deadline = time.monotonic() + timeout_ms / 1000
        correlation_id = aeron.next_correlation_id()
        listener = ClusterControlAdapter(correlation_id, membership)
        adapter = SbeAdapter(CLUSTER, listener, TO_SERVICE, name="ClusterControlAdapter")
        proxy = ConsensusModuleProxy(publication)

        def handler(buffer, offset, length, header):
            adapter.on_fragment(buffer, offset, length, header)

        while not publication.is_connected or not subscription.is_connected:
            if time.monotonic() > deadline:
                return None
            time.sleep(0.001)
        while not proxy.cluster_members_query(correlation_id, EXTENDED):
            if time.monotonic() > deadline:
                return None
            time.sleep(0.001)
        while not listener.answered:
            if subscription.poll(handler, 10) == 0:
                if time.monotonic() > deadline:
                    return None
                time.sleep(0.001)
    return membership
