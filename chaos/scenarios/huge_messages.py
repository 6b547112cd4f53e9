"""Terms filled with the longest messages a publication allows, from two publishers sharing it.

Two publisher processes share one concurrent IPC publication; every K-th message of each is
``max_message_length`` long (term length / 8, so about a hundred MTU fragments, a handful fill a term and
force rotation), the rest are small. Before its first huge message each publisher offers one byte more,
which must raise ``MessageTooLongError`` naming the length and the limit, and send nothing. The subscribers
(one polling a fragment at a time) reassemble every message intact and in order: fragments of one message
are contiguous in the log even while another process appends to the same publication.
"""

from chaos.scenario import Scenario


class HugeMessages(Scenario):
    name = "huge-messages"
    summary = "max-length fragmented messages from two publishers fill the terms; one byte more is refused; no loss"

    def run(self, ctx):
        count = 400 if ctx.quick else 4000
        ctx.start_subscriber("subA").await_ready()
        ctx.start_subscriber("subOneFragment", fragment_limit=1).await_ready()
        for pub in (0, 1):
            ctx.start_publisher(f"pub{pub}", pub, count, interval_us=ctx.rng.choice([0, 100]),
                                huge_every=ctx.rng.choice([5, 10, 20]))
        ctx.timeline.event("schedule", count=count)

    def check(self, ctx, before, after):
        failures = []
        huge = 0
        for name in ("pub0", "pub1"):
            events = ctx.workers[name].events()
            too_long = [e for e in events if e["event"] == "too_long"]
            if len(too_long) != 1 or "> max_message_length=" not in too_long[0]["message"]:
                failures.append(f"{name}: expected one MessageTooLongError naming the limit, got {too_long}")
                continue
            limit = too_long[0]["length"] - 1
            huge += sum(1 for e in events if e["event"] == "sent" and e["length"] == limit)
        ctx.metrics["max_length_messages_acked"] = huge
        if huge == 0:
            failures.append("no max-length message was acknowledged")
        return failures
