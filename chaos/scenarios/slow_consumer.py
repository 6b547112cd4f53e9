"""(6) A slow consumer: the publisher is back-pressured, never loses anything."""

from chaos.scenario import Scenario


class SlowConsumer(Scenario):
    name = "slow-consumer"
    summary = "a subscriber polling slowly back-pressures the publisher; nothing is lost"

    def run(self, ctx):
        count = 3000 if ctx.quick else 30000
        ctx.start_subscriber("subSlow", poll_sleep_us=ctx.rng.choice([1000, 2000]), fragment_limit=8).await_ready()
        ctx.start_subscriber("subA").await_ready()
        # Either kind of publication: back pressure works the same on a shared log and an exclusive one.
        ctx.start_publisher("pub0", 0, count, interval_us=0, exclusive=ctx.rng.random() < 0.5)

    def check(self, ctx, before, after):
        done = [e for e in ctx.workers["pub0"].events() if e["event"] == "done"]
        if not done:
            return ["pub0 logged no 'done'"]
        ctx.metrics["back_pressured"] = done[0]["back_pressured"]
        return [] if done[0]["back_pressured"] > 0 else ["the slow subscriber never back-pressured the publisher"]
