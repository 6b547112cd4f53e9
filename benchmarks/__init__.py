"""Benchmarks: the IPC transport against its floors and against what a Python user would pick instead.

    python -m benchmarks run [--quick|--tiny] [--out DIR] [--only PATTERN ...]
    python -m benchmarks gate [--quick] [--baseline FILE] [--summary summary.json] [--update-baseline]
    python -m benchmarks.kernels          # single-process kernel ceiling (no driver, no second process)

One run measures, with the same two pinned worker processes (A on core 0, B on core 1) and one media
driver: IPC round trips (``ipc_rtt``), fixed-rate open-loop latency (``fixed_rate``), IPC throughput
(``ipc_throughput``), the peers (``peers``: pyzmq, ``multiprocessing.Pipe``, iceoryx2) and the floors
(``floors``: a cache line ping-pong, the Python store+load ping-pong, memcpy). ``report`` prints the table,
writes pyperf JSON, ``summary.json`` and percentile plots; ``gate`` judges the ratios against
``baseline.json``.

Modules: ``plan`` (cases and profiles), ``runner`` (driver, workers, watchdog, clean-up), ``worker`` (the
pinned worker processes), ``control`` (their barrier file), ``loops`` (every compiled loop), ``stats``
(HdrHistogram and windows), ``aeron_pairs`` (registering publications/subscriptions), ``registry``.

``python -m benchmarks cluster`` (``benchmarks/cluster/``) is a harness of its own: 3-node clusters on loopback
(aeron-numba's, PySyncObj's, etcd's) behind one small interface, an open-loop load generator, the sustained-rate
ladder and the failover measurement.
"""
