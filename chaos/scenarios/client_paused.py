"""(4) A subscriber client paused (SIGSTOP) longer than the liveness timeout, then resumed (SIGCONT).

The driver times it out (Client liveness timeouts +1), the publisher is released from its back pressure,
the resumed client notices that it was dropped (ClientTimeoutError, or ConductorServiceTimeoutError when
its own conductor sees the stall first) and a fresh connection receives from its new join position on.
"""

from chaos import faults
from chaos.scenario import CLIENT_TIMEOUTS, LIVENESS_TIMEOUT_S, Scenario
from harness.awaiting import await_condition

CLIENT_ENDED = {"ClientTimeoutError", "ConductorServiceTimeoutError"}


class ClientPaused(Scenario):
    name = "client-paused"
    summary = "SIGSTOP a subscriber past the liveness timeout, SIGCONT it: timed out, notices, reconnects"
    counter_deltas = {CLIENT_TIMEOUTS: 1}

    def run(self, ctx):
        steady, paused = ctx.start_subscriber("subA"), ctx.start_subscriber("subB", reconnect=True)
        steady.await_ready()
        paused.await_ready()
        publisher = ctx.start_publisher("pub0", 0, 0, interval_us=200)  # until stopped
        pause_at = ctx.rng.randint(200, 1000 if ctx.quick else 5000)
        pause_s = LIVENESS_TIMEOUT_S + ctx.rng.uniform(0.5, 1.5)
        ctx.timeline.event("schedule", pause_after_acked=pause_at, pause_s=pause_s, target=paused.name)
        faults.await_acked(ctx, publisher, pause_at)
        _, resumed_ts = faults.pause(ctx, paused, pause_s)

        def received_again():
            return any(e["event"] == "recv" and e.get("incarnation", 0) >= 1 for e in paused.events())

        await_condition(received_again, 60, "the resumed subscriber to reconnect and receive",
                        processes=[paused.process, publisher.process])
        ctx.record_recovery(resumed_ts, ctx.timeline.event("observed", what="reconnected subscriber received")["ts_ns"],
                            "resume to first message on a fresh connection")
        more = ctx.rng.randint(200, 600 if ctx.quick else 5000)
        faults.await_acked(ctx, publisher, publisher.count("sent") + more)
        ctx.stop_worker(publisher)

    def check(self, ctx, before, after):
        errors = [e["error"] for e in ctx.workers["subB"].events() if e["event"] == "client_error"]
        ctx.metrics["paused_client_error"] = errors
        if len(errors) != 1 or errors[0] not in CLIENT_ENDED:
            return [f"subB client errors {errors}, expected exactly one of {sorted(CLIENT_ENDED)}"]
        return []
