"""Cluster's messages (schema 111, version 12): ``CLUSTER.SessionEvent(...)``, ``CLUSTER.encode(message)``,
``CLUSTER.decode(buffer, offset, length)``; see ``codecs/sbe.py``. And what travels on each direction of its four
protocols (spec/cluster.md §5-§7, §9), as Aeron 1.48's adapters read and its proxies and publishers write them:
the sets the adapters receive and the generated proxies (``codecs/cluster_proxies.py``) send.

SessionMessageHeader heads an application message: on ingress, egress, the service-to-consensus-module stream, the
log and the consensus module's snapshot, the application's bytes follow it in the same fragment, so its class has a
``payload`` (``payload_follows``). Every other message of the schema is whole in itself.
"""

from aeron_numba.codecs.sbe import SbeCodec
from aeron_numba.layout.cluster_schema import CLUSTER_SCHEMA
from aeron_numba.layout.sbe import MESSAGE_HEADER_LENGTH

#: The message whose fragment goes on with the application's payload.
PAYLOAD_FOLLOWS = ("SessionMessageHeader",)

CLUSTER = SbeCodec(CLUSTER_SCHEMA, payload_follows=PAYLOAD_FOLLOWS)

#: Where an application message's payload starts in its fragment (Aeron's AeronCluster.SESSION_HEADER_LENGTH, 32).
SESSION_HEADER_LENGTH = MESSAGE_HEADER_LENGTH + CLUSTER_SCHEMA.message("SessionMessageHeader").block_length

#: Client -> cluster, on the ingress channel (stream 101): what Aeron's AeronCluster offers on its ingress
#: publication and the consensus module's IngressAdapter reads (application messages, then session control).
INGRESS = ("SessionMessageHeader", "SessionConnectRequest", "SessionCloseRequest", "SessionKeepAlive",
           "ChallengeResponse", "AdminRequest")

#: Cluster -> client, on the response channel the client connected with (stream 102): the consensus module's
#: EgressPublisher sends the session events, the challenge, new-leader notices and admin responses; a service's
#: ClientSession sends application replies behind a SessionMessageHeader. The client's EgressPoller reads them
#: while connecting (Challenge included), its EgressAdapter once connected.
EGRESS = ("SessionMessageHeader", "SessionEvent", "NewLeaderEvent", "Challenge", "AdminResponse")

#: Member <-> member, on the consensus channel (stream 108): elections, replication positions, catch-up and
#: termination; the queries of backup and standby nodes (BackupQuery, HeartbeatRequest, StandbySnapshot); and
#: ChallengeResponse, from such a node a member challenged or forwarded by a follower that took it on ingress. Aeron's
#: ConsensusPublisher sends them all and its ConsensusAdapter reads them all.
CONSENSUS = ("CanvassPosition", "RequestVote", "Vote", "NewLeadershipTerm", "AppendPosition", "CommitPosition",
             "CatchupPosition", "StopCatchup", "TerminationPosition", "TerminationAck", "BackupQuery",
             "ChallengeResponse", "HeartbeatRequest", "StandbySnapshot")

#: Member -> backup or standby node, on the response channel its query named: what Aeron's ConsensusPublisher
#: answers BackupQuery and HeartbeatRequest with. (A member that authenticates the node sends that channel a
#: Challenge, or a SessionEvent rejecting it, through its EgressPublisher: so Aeron's ClusterBackupAgent reads
#: BackupResponse, Challenge and SessionEvent there.)
BACKUP_RESPONSES = ("BackupResponse", "HeartbeatResponse")

#: Consensus module -> service, on the service stream (104, IPC): what Aeron's ServiceProxy sends. A service's
#: ServiceAdapter acts on JoinLog, ServiceTerminationPosition and requestServiceAck and passes over the members
#: responses, which answer the ClusterMembersQuery of ClusterTool listening on the same stream.
TO_SERVICE = ("JoinLog", "ServiceTerminationPosition", "requestServiceAck", "ClusterMembersResponse",
              "ClusterMembersExtendedResponse")

#: Service -> consensus module, on the consensus module stream (105, IPC): what Aeron's ConsensusModuleProxy sends
#: (ClusterTool sends ClusterMembersQuery the same way) and a service's messages to the cluster (behind a
#: SessionMessageHeader), all read by the consensus module's ConsensusModuleAdapter.
TO_CONSENSUS_MODULE = ("SessionMessageHeader", "CloseSession", "ScheduleTimer", "CancelTimer", "ServiceAck",
                       "ClusterMembersQuery")

#: The log (stream 100, recorded by the archive; replayed to services on stream 103): what the leader's
#: LogPublisher appends, which followers' LogAdapter and services' BoundedLogAdapter read.
LOG = ("SessionMessageHeader", "TimerEvent", "SessionOpenEvent", "SessionCloseEvent", "ClusterActionRequest",
       "NewLeadershipTermEvent")

#: The consensus module's snapshot (stream 107, recorded): BEGIN and END markers around its state, its sessions,
#: timers, and per service the pending-message tracker followed by the pending service messages themselves
#: (Aeron's ConsensusModuleSnapshotTaker writes it, ConsensusModuleSnapshotAdapter reads it; spec §9).
CONSENSUS_MODULE_SNAPSHOT = ("SnapshotMarker", "ConsensusModule", "ClusterSession", "Timer",
                             "PendingMessageTracker", "SessionMessageHeader")

#: A service's snapshot (stream 106, recorded): BEGIN marker, its client sessions, then the application's own
#: state (not this schema's), then the END marker (Aeron's ServiceSnapshotTaker and ServiceSnapshotLoader).
SERVICE_SNAPSHOT = ("SnapshotMarker", "ClientSession")

#: Messages of the schema that Aeron 1.48 never sends. The dynamic-join messages (AddPassiveMember,
#: ClusterMembersChange, SnapshotRecordingQuery, SnapshotRecordings, JoinCluster) and RemoveMember are left from
#: versions before dynamic join was removed. A log or snapshot written by such a version may still hold a
#: MembershipChangeEvent or a ClusterMembers, which Aeron's BoundedLogAdapter and ConsensusModuleSnapshotAdapter
#: read and skip.
NOT_SENT = ("AddPassiveMember", "ClusterMembersChange", "SnapshotRecordingQuery", "SnapshotRecordings",
            "JoinCluster", "RemoveMember", "MembershipChangeEvent", "ClusterMembers")
