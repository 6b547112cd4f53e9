"""An untethered subscriber (``tether=false``) stalls: it is dropped, the publisher moves on, it rejoins.

Beside a tethered subscriber, an untethered one stops polling. Once it is far enough behind to hold the
publisher (window - window/4) for the window limit timeout, the driver tells its client the image is gone
(LINGER); one more window limit timeout later it RESTS and no longer holds the publisher, which moves on;
after the resting timeout the driver offers the image again at the consumer position. The subscriber polls
again and must receive everything acknowledged after that join; the tethered one receives everything. The
timeouts are set on the subscription channel (1 s window limit, 2 s resting). Nobody times out.
"""

from chaos import faults
from chaos.scenario import Scenario
from harness.awaiting import await_condition

WINDOW_LIMIT_TIMEOUT_S = 1.0
RESTING_TIMEOUT_S = 2.0
UNTETHERED_CHANNEL = (f"aeron:ipc?tether=false|untethered-window-limit-timeout={int(WINDOW_LIMIT_TIMEOUT_S * 1000)}ms"
                      f"|untethered-resting-timeout={int(RESTING_TIMEOUT_S * 1000)}ms")
TIMER_SLACK_S = 5.0  # timer ticks, the client conductor's cycle, Python scheduling on 2 busy cores


def _images(worker, event):
    return [e for e in worker.events() if e["event"] == event]


class UntetheredSubscriber(Scenario):
    name = "untethered-subscriber"
    summary = "an untethered subscriber stalls: dropped, the publisher moves on, it rejoins at the live position"

    def run(self, ctx):
        tethered = ctx.start_subscriber("subA")
        untethered = ctx.start_subscriber("subU", channel=UNTETHERED_CHANNEL)
        tethered.await_ready()
        untethered.await_ready()
        publisher = ctx.start_publisher("pub0", 0, 0, interval_us=ctx.rng.choice([0, 20, 50]))
        stall_at = ctx.rng.randint(200, 1000 if ctx.quick else 5000)
        unstall_before_rejoin = ctx.rng.random() < 0.5
        ctx.timeline.event("schedule", stall_after_acked=stall_at, unstall_before_rejoin=unstall_before_rejoin)
        faults.await_acked(ctx, publisher, stall_at)
        stalled_ts = faults.stall(ctx, untethered)
        deadline = 2 * WINDOW_LIMIT_TIMEOUT_S + RESTING_TIMEOUT_S + TIMER_SLACK_S
        await_condition(lambda: _images(untethered, "image_gone"), deadline, "the untethered image to go",
                        processes=[untethered.process])
        gone_ts = ctx.timeline.event("observed", what="untethered subscriber dropped")["ts_ns"]
        ctx.record_recovery(stalled_ts, gone_ts, "stall to the untethered subscriber being dropped")
        if unstall_before_rejoin:
            faults.unstall(ctx, untethered)
        await_condition(lambda: len(_images(untethered, "image")) >= 2, deadline, "the untethered image to rejoin",
                        processes=[untethered.process])
        rejoined_ts = ctx.timeline.event("observed", what="untethered subscriber rejoined")["ts_ns"]
        ctx.record_recovery(stalled_ts, rejoined_ts, "stall to the untethered subscriber rejoining")
        if not unstall_before_rejoin:
            faults.unstall(ctx, untethered)
        ctx.stalled_ts_ns, ctx.rejoined_ts_ns = stalled_ts, rejoined_ts
        join = _images(untethered, "image")[-1]["join_position"]
        await_condition(lambda: any(e["event"] == "recv" and e["position"] > join for e in untethered.events()),
                        30, "the rejoined subscriber to receive", processes=[untethered.process])
        faults.await_acked(ctx, publisher, publisher.count("sent") + ctx.rng.randint(200, 1000 if ctx.quick else 5000))
        ctx.stop_worker(publisher)

    def check(self, ctx, before, after):
        failures = []
        untethered, tethered = ctx.workers["subU"], ctx.workers["subA"]
        images = _images(untethered, "image")
        if len(images) < 2 or images[-1]["join_position"] <= images[0]["join_position"]:
            failures.append(f"subU images {images}: expected a rejoin at a later position")
        moved = [e for e in ctx.workers["pub0"].events()
                 if e["event"] == "sent" and ctx.stalled_ts_ns < e["ts_ns"] < ctx.rejoined_ts_ns]
        ctx.metrics["acked_while_untethered_stalled"] = len(moved)
        if not moved:
            failures.append("the publisher acknowledged nothing while the untethered subscriber was stalled")
        gone_early = [e for e in _images(tethered, "image_gone") if e["ts_ns"] < ctx.rejoined_ts_ns]
        if gone_early:
            failures.append("the tethered subscriber lost its image while the untethered one was dropped")
        for name in ("subA", "subU", "pub0"):
            errors = [e["error"] for e in ctx.workers[name].events() if e["event"] == "client_error"]
            if errors:
                failures.append(f"{name} ended with {errors}")
        return failures
