"""The cluster client (Aeron's ``io.aeron.cluster.client``): ``AeronCluster`` connects to a cluster's leader,
offers messages behind the session header, polls the egress and follows the leader through elections.

``AeronCluster.connect(ctx)`` with an ``AeronClusterContext`` (``cluster/context.py``), an ``EgressListener`` for
the replies, and a ``CredentialsSupplier`` when the cluster authenticates; ``AeronCluster.async_connect`` for a
duty cycle. Errors: ``ClusterError`` (the cluster refused), ``AuthenticationError``, ``ClusterConnectTimeoutError``
(no leader answered), ``ClusterClientClosedError`` (an offer on a closed session). ``AeronCluster.compiled()`` and
``ingress_offer`` / ``ingress_try_claim`` offer from ``@njit`` code.
"""

from aeron_numba.cluster.client.aeron_cluster import AeronCluster, State
from aeron_numba.cluster.client.async_connect import AsyncConnect, ConnectState
from aeron_numba.cluster.client.egress_adapter import EgressAdapter
from aeron_numba.cluster.client.egress_listener import AdminRequestType, AdminResponseCode, EgressListener, EventCode
from aeron_numba.cluster.client.egress_poller import EgressPoller
from aeron_numba.cluster.client.errors import AuthenticationError, ClusterClientClosedError, ClusterConnectTimeoutError
from aeron_numba.cluster.client.ingress_handle import IngressHandle, ingress_offer, ingress_try_claim
from aeron_numba.cluster.client.ingress_session_decorator import IngressSessionDecorator
from aeron_numba.cluster.cluster_error import ClusterError

__all__ = [
    "AeronCluster",
    "AsyncConnect",
    "ConnectState",
    "State",
    "EgressAdapter",
    "EgressListener",
    "EgressPoller",
    "IngressSessionDecorator",
    "IngressHandle",
    "ingress_offer",
    "ingress_try_claim",
    "EventCode",
    "AdminRequestType",
    "AdminResponseCode",
    "ClusterError",
    "AuthenticationError",
    "ClusterConnectTimeoutError",
    "ClusterClientClosedError",
]
