"""A subscriber that stops polling (its client alive and heartbeating) for longer than the liveness timeout.

Unlike a paused process, a stalled consumer is not timed out: its client keeps heartbeating, so the driver
keeps its subscriber position and the IPC publication limit stays tied to it. The publisher runs into the
limit (back pressure, observed as its last acknowledged position reaching the publication limit) and waits;
once the subscriber polls again it catches up, the publisher resumes, and nothing is lost for either
subscriber. No client times out.
"""

from aeron_numba.layout import counters as cl
from chaos import faults
from chaos.scenario import LIVENESS_TIMEOUT_S, Scenario
from chaos.workload import DEFAULT_MAX_LENGTH
from harness.awaiting import NotYet, await_condition

MAX_FRAME = DEFAULT_MAX_LENGTH + 64  # the longest chaos frame, header and alignment included


class SubscriberStalled(Scenario):
    name = "subscriber-stalled"
    summary = "a subscriber stops polling past the liveness timeout: back pressure, no timeout, no loss"

    def run(self, ctx):
        count = 4000 if ctx.quick else 20000
        stalled, other = ctx.start_subscriber("subStalled"), ctx.start_subscriber("subA")
        stalled.await_ready()
        other.await_ready()
        publisher = ctx.start_publisher("pub0", 0, count, interval_us=ctx.rng.choice([0, 50, 100]),
                                        exclusive=ctx.rng.random() < 0.5)
        stall_at = ctx.rng.randint(100, count // 4)
        stall_s = ctx.rng.uniform(LIVENESS_TIMEOUT_S + 0.5, LIVENESS_TIMEOUT_S + (1.5 if ctx.quick else 4.0))
        ctx.timeline.event("schedule", stall_after_acked=stall_at, stall_s=stall_s, target=stalled.name)
        faults.await_acked(ctx, publisher, stall_at)
        stalled_ts = faults.stall(ctx, stalled)

        def at_limit():
            limits = ctx.counters.find_all(type_id=cl.PUBLISHER_LIMIT_TYPE_ID)
            sent = [e["position"] for e in publisher.events() if e["event"] == "sent"]
            if not limits or not sent:
                return NotYet("no publication limit or nothing sent yet")
            gap = limits[0].value - sent[-1]
            return True if gap < MAX_FRAME else NotYet(f"{gap} bytes below the publication limit")

        await_condition(at_limit, 30, "the publisher to reach the stalled subscriber's limit",
                        processes=[publisher.process])
        blocked_ts = ctx.timeline.event("observed", what="publisher at the publication limit")["ts_ns"]
        ctx.metrics["stall_to_back_pressure_s"] = (blocked_ts - stalled_ts) / 1e9
        faults.hold(stall_s - (blocked_ts - stalled_ts) / 1e9)
        sent_before = publisher.count("sent")
        resumed_ts = faults.unstall(ctx, stalled)
        faults.await_acked(ctx, publisher, min(count, sent_before + 1))
        acked_ts = ctx.timeline.event("observed", what="publisher acknowledged again")["ts_ns"]
        ctx.record_recovery(resumed_ts, acked_ts, "stalled subscriber resumes to the publisher moving again")

    def check(self, ctx, before, after):
        failures = []
        done = [e for e in ctx.workers["pub0"].events() if e["event"] == "done"]
        if not done:
            return ["pub0 logged no 'done'"]
        ctx.metrics["back_pressured"] = done[0]["back_pressured"]
        if done[0]["back_pressured"] == 0:
            failures.append("the stalled subscriber never back-pressured the publisher")
        for name in ("subStalled", "subA"):
            errors = [e["error"] for e in ctx.workers[name].events() if e["event"] == "client_error"]
            if errors:
                failures.append(f"{name} ended with {errors}: a stalled but live client must not be timed out")
        return failures
