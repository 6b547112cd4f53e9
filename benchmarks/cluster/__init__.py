"""The cluster benchmark (issue 19): ``python -m benchmarks cluster``.

Modules: ``load`` (the open-loop and closed-loop load generator, the sustained-rate rule and ladder, the failover
measurement; pure, on an injected clock), ``systems`` (the ``KvSystem`` interface: start three nodes, leader, run a
load, kill the leader, stop), ``pysyncobj_system`` + ``pysyncobj_node`` (PySyncObj, the load generator in a
node), ``etcd_system`` (etcd 3.4 members, a gRPC or JSON-gateway client), ``aeron_system`` (aeron-numba's cluster
with the example key-value service, an ``AeronCluster`` client) and ``bench`` (the run, the table, the ratios).
"""
