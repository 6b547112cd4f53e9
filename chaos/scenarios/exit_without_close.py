"""(8) A publisher client exits without closing (no CLIENT_CLOSE, no REMOVE_PUBLICATION).

The driver reclaims its resources after the liveness timeout (Client liveness timeouts +1; its heartbeat
and publisher-limit counters and the log file go once the subscriber has drained it), the subscriber
still receives every acknowledged message, and nothing lands in the error log.
"""

from aeron_numba.layout import counters as cl
from chaos.scenario import CLIENT_TIMEOUTS, LIVENESS_TIMEOUT_S, Scenario


class ExitWithoutClose(Scenario):
    name = "exit-without-close"
    summary = "a publisher exits without closing; the driver reclaims it after the liveness timeout"
    counter_deltas = {CLIENT_TIMEOUTS: 1}

    def run(self, ctx):
        count = ctx.rng.randint(500, 2000) if ctx.quick else ctx.rng.randint(5000, 30000)
        ctx.start_subscriber("subA").await_ready()
        publisher = ctx.start_publisher("pub0", 0, count, interval_us=ctx.rng.choice([0, 100]),
                                        exit_without_close=True)
        publisher.process.wait(60)
        exit_ts = ctx.timeline.event("process_exit", name=publisher.name, pid=publisher.process.pid,
                                     exit_code=publisher.process.exit_code)["ts_ns"]
        timed_out_ts = ctx.await_counter(CLIENT_TIMEOUTS, lambda v: v >= 1, LIVENESS_TIMEOUT_S + 10,
                                         "the exited client timed out")
        ctx.record_recovery(exit_ts, timed_out_ts, "liveness timeout of the client that did not close")
        ctx.await_counter_count(cl.CLIENT_HEARTBEAT_TYPE_ID, 1, 5, "only the subscriber's heartbeat left")
        ctx.await_counter_count(cl.PUBLISHER_LIMIT_TYPE_ID, 0, 10, "the publication freed")
