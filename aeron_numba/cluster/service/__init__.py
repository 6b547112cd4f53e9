"""The service side of Aeron Cluster (Aeron 1.48's ``io.aeron.cluster.service``): the ``ClusteredService`` a user
writes, the ``Cluster`` and ``ClientSession`` it is given, and the container that runs it
(``ClusteredServiceContainer`` over the ``ClusteredServiceAgent``, with its ``ServiceAdapter``,
``BoundedLogAdapter`` and snapshot taker/loader). ``python -m aeron_numba.cluster.service --service
package.module:ClassName`` runs one."""

from aeron_numba.cluster.service.client_session import ContainerClientSession
from aeron_numba.cluster.service.clustered_service import (
    MOCKED_OFFER,
    ClientSession,
    CloseReason,
    Cluster,
    ClusteredService,
    ClusteredServiceBase,
    Role,
)
from aeron_numba.cluster.service.clustered_service_agent import ClusteredServiceAgent, ClusterTerminationException
from aeron_numba.cluster.service.container import ClusteredServiceContainer

__all__ = ["ClientSession", "CloseReason", "Cluster", "ClusterTerminationException", "ClusteredService",
           "ClusteredServiceAgent", "ClusteredServiceBase", "ClusteredServiceContainer", "ContainerClientSession",
           "MOCKED_OFFER", "Role"]
