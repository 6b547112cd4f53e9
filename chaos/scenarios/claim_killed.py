"""(3) A publisher killed between try_claim and commit while another keeps publishing on the same stream.

The claimed frame is never committed: subscribers stop at it. After the unblock timeout the driver turns
it into padding (Unblocked Publications +1) and the subscribers receive everything acknowledged after the
gap; the dead client is timed out (Client liveness timeouts +1).
"""

from chaos import faults
from chaos.scenario import CLIENT_TIMEOUTS, UNBLOCK_TIMEOUT_S, UNBLOCKED, Scenario


class PublisherKilledMidClaim(Scenario):
    name = "publisher-killed-mid-claim"
    summary = "kill a publisher between try_claim and commit; the driver unblocks the log, nothing acked is lost"
    counter_deltas = {CLIENT_TIMEOUTS: 1, UNBLOCKED: 1}

    def run(self, ctx):
        count = 3000 if ctx.quick else 30000
        subs = [ctx.start_subscriber("subA"), ctx.start_subscriber("subB")]
        for sub in subs:
            sub.await_ready()
        claimer = ctx.start_claimer("claimer")
        claimer.await_ready()
        publisher = ctx.start_publisher("pub0", 0, count, interval_us=ctx.rng.choice([100, 200, 300]))
        claim_at = ctx.rng.randint(count // 10, count // 3)
        ctx.timeline.event("schedule", claim_after_acked=claim_at)
        faults.await_acked(ctx, publisher, claim_at)
        died_ts = faults.kill_between_claim_and_commit(ctx, claimer)
        unblocked_ts = ctx.await_counter(UNBLOCKED, lambda v: v >= 1, UNBLOCK_TIMEOUT_S + 10,
                                         "the driver unblocked the publication")
        ctx.record_recovery(died_ts, unblocked_ts, "unblock of the uncommitted claim")
        ctx.expected_exits[claimer.name] = -9

    def check(self, ctx, before, after):
        claimed = [e for e in ctx.workers["claimer"].events() if e["event"] == "claimed"]
        if not claimed:
            return ["the claimer never logged its claim"]
        position = claimed[0]["position"]
        after_gap = [e for e in ctx.workers["pub0"].events() if e["event"] == "sent" and e["position"] > position]
        ctx.metrics["acked_after_gap"] = len(after_gap)
        return [] if after_gap else ["no message was acknowledged after the uncommitted claim: nothing tested"]
