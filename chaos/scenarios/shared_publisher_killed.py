"""(2) One of two publishers sharing a concurrent publication (same channel and stream: one log, one
session) SIGKILLed mid-stream.

The survivor keeps publishing on the same session and every message it (and the victim, before it died)
had acknowledged arrives; the image stays available while a publisher lives (no ``image_gone`` before the
survivor is done); the dead client is timed out (Client liveness timeouts +1).
"""

from chaos import faults
from chaos.scenario import CLIENT_TIMEOUTS, LIVENESS_TIMEOUT_S, UNBLOCKED, Scenario


class SharedPublisherKilled(Scenario):
    name = "shared-publisher-killed"
    summary = "SIGKILL one of two publishers on the same publication; the other carries on, the image stays"
    # A SIGKILL landing inside offer, between the claim and the commit of its frame, leaves a gap the driver
    # unblocks (Unblocked Publications +1); offer's claim-to-commit window is a few hundred ns, so rare.
    counter_deltas = {CLIENT_TIMEOUTS: 1, UNBLOCKED: {0, 1}}

    def run(self, ctx):
        subs = [ctx.start_subscriber("subA"), ctx.start_subscriber("subB")]
        for sub in subs:
            sub.await_ready()
        survivor = ctx.start_publisher("pub0", 0, 0, interval_us=ctx.rng.choice([100, 200, 300]))
        survivor.await_ready()
        victim = ctx.start_publisher("pub1", 1, 0, interval_us=ctx.rng.choice([100, 200, 300]))
        victim.await_ready()
        kill_at = ctx.rng.randint(200, 1000 if ctx.quick else 5000)
        ctx.timeline.event("schedule", kill_publisher_after_acked=kill_at, victim=victim.name)
        faults.await_acked(ctx, victim, kill_at)
        killed_ts = ctx.killed_ts_ns = faults.kill(ctx, victim)
        ctx.expected_exits[victim.name] = -9
        timed_out_ts = ctx.await_counter(CLIENT_TIMEOUTS, lambda v: v >= 1, LIVENESS_TIMEOUT_S + 10,
                                         "the killed publisher's client timed out")
        ctx.record_recovery(killed_ts, timed_out_ts, "liveness timeout of the killed publisher")
        more = ctx.rng.randint(300, 800 if ctx.quick else 5000)
        faults.await_acked(ctx, survivor, survivor.count("sent") + more)
        ctx.stop_worker(survivor)

    def check(self, ctx, before, after):
        failures = []
        sessions = {e["session"] for name in ("pub0", "pub1") for e in ctx.workers[name].events()
                    if e["event"] == "publication"}
        if len(sessions) != 1:
            failures.append(f"the publishers did not share one session: {sorted(sessions)}")
        killed_ns = ctx.killed_ts_ns
        survivor = ctx.workers["pub0"].events()
        after_kill = [e for e in survivor if e["event"] == "sent" and e["ts_ns"] > killed_ns]
        ctx.metrics["survivor_acked_after_kill"] = len(after_kill)
        if not after_kill:
            failures.append("pub0 acknowledged nothing after pub1 was killed: nothing tested")
        done = [e["ts_ns"] for e in survivor if e["event"] == "done"]
        if not done:
            failures.append("pub0 logged no 'done'")
        for name in ("subA", "subB"):
            gone = [e for e in ctx.workers[name].events() if e["event"] == "image_gone"]
            early = [e for e in gone if not done or e["ts_ns"] < done[0]]
            if early:
                failures.append(f"{name}: image_gone for session {early[0]['session']} while pub0 still published")
        return failures
