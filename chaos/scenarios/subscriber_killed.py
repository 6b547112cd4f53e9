"""(1) A subscriber SIGKILLed mid-stream.

The driver times its client out after the liveness timeout (Client liveness timeouts +1) and frees its
subscriber position, so the publication limit moves again: the publisher, back-pressured by the dead
subscriber, finishes its stream; the other subscriber receives every acknowledged message.
"""

from aeron_numba.layout import counters as cl
from chaos import faults
from chaos.scenario import CLIENT_TIMEOUTS, LIVENESS_TIMEOUT_S, Scenario


class SubscriberKilled(Scenario):
    name = "subscriber-killed"
    summary = "SIGKILL one of two subscribers mid-stream; the other gets everything, the limit moves again"
    counter_deltas = {CLIENT_TIMEOUTS: 1}

    def run(self, ctx):
        count = 3000 if ctx.quick else 30000
        survivor, victim = ctx.start_subscriber("subA"), ctx.start_subscriber("subB")
        survivor.await_ready()
        victim.await_ready()
        publisher = ctx.start_publisher("pub0", 0, count, interval_us=ctx.rng.choice([0, 100, 200]),
                                        exclusive=ctx.rng.random() < 0.5)
        kill_at = ctx.rng.randint(count // 10, count // 2)
        ctx.timeline.event("schedule", kill_subscriber_after_acked=kill_at, victim=victim.name)
        faults.await_acked(ctx, publisher, kill_at)
        killed_ts = faults.kill(ctx, victim)
        timed_out_ts = ctx.await_counter(CLIENT_TIMEOUTS, lambda v: v >= 1, LIVENESS_TIMEOUT_S + 10,
                                         "the killed subscriber's client timed out")
        ctx.record_recovery(killed_ts, timed_out_ts, "liveness timeout frees the dead subscriber")
        ctx.await_counter_count(cl.SUBSCRIBER_POSITION_TYPE_ID, 1, 5, "one subscriber position left")
        ctx.expected_exits[victim.name] = -9

    def check(self, ctx, before, after):
        done = [e for e in ctx.workers["pub0"].events() if e["event"] == "done"]
        if not done:
            return ["pub0 logged no 'done': the publication limit never moved again?"]
        ctx.metrics["back_pressured"] = done[0]["back_pressured"]
        expected = 3000 if ctx.quick else 30000
        return [] if done[0]["sent"] == expected else [f"pub0 sent {done[0]['sent']} of {expected}"]
