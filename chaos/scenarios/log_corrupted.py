"""One byte of a message flipped in a publication's log file before any subscriber has read it.

Both subscribers are stalled (they poll nothing, their clients stay alive), the publisher sends, and the
controller flips one payload byte of an acknowledged message straight in ``publications/<id>.logbuffer``, as
a stray write from another process would. Transport framing is untouched, so Aeron delivers the message
as it now is: each subscriber must flag exactly that message as corrupt (its payload check fails) and
receive every other one intact, in order, once. This also proves the chaos payload check can fail.
"""

from aeron_numba.layout import frame
from aeron_numba.kernels import position as pos
from aeron_numba.layout.bits import align
from aeron_numba.layout.log_buffers import LogBuffers
from chaos import faults
from chaos.scenario import Scenario
from chaos.workload import DEFAULT_MAX_LENGTH, HEADER_BYTES, message_length

MAX_VICTIM_SEQ = 300  # victims stay well inside the first publication window (term length / 2)


class LogByteCorrupted(Scenario):
    name = "log-byte-corrupted"
    summary = "flip a payload byte of an unread message in the log: exactly that message arrives flagged corrupt"

    def run(self, ctx):
        subscribers = [ctx.start_subscriber("subA"), ctx.start_subscriber("subB")]
        for sub in subscribers:
            sub.await_ready()
            faults.stall(ctx, sub)
        count = 1000 if ctx.quick else 10000
        publisher = ctx.start_publisher("pub0", 0, count, interval_us=0)
        # Victims have a byte past their (pub, seq) words (a 16-byte message has none).
        candidates = [seq for seq in range(MAX_VICTIM_SEQ)
                      if message_length(ctx.seed, 0, seq, DEFAULT_MAX_LENGTH) > HEADER_BYTES]
        victims = sorted(ctx.rng.sample(candidates, 1 if ctx.quick else ctx.rng.randint(1, 3)))
        faults.await_acked(ctx, publisher, victims[-1] + 1)
        (registration,) = [e for e in publisher.events() if e["event"] == "publication"]
        sent = {e["seq"]: e for e in publisher.events() if e["event"] == "sent"}
        path = ctx.aeron_dir / "publications" / f"{registration['registration_id']}.logbuffer"
        with LogBuffers.open(path) as log:
            term_length, bits = log.term_length, log.position_bits_to_shift
        for seq in victims:
            message = sent[seq]
            frame_position = message["position"] - align(message["length"] + frame.HEADER_LENGTH,
                                                         frame.FRAME_ALIGNMENT)
            in_file = (pos.index_by_position(frame_position, bits) * term_length
                       + pos.compute_term_offset_from_position(frame_position, bits))
            byte = ctx.rng.randrange(HEADER_BYTES, message["length"])  # past (pub, seq): it still says who it is
            faults.corrupt_byte(ctx, path, in_file + frame.HEADER_LENGTH + byte, ctx.rng.randint(1, 255))
            ctx.corrupted.add((0, seq))
        ctx.timeline.event("schedule", corrupted_seqs=victims)
        for sub in subscribers:
            faults.unstall(ctx, sub)

    def check(self, ctx, before, after):
        failures = []
        for name in ("subA", "subB"):
            bad = sorted(e["seq"] for e in ctx.workers[name].events() if e["event"] == "recv" and e.get("bad_payload"))
            expected = sorted(seq for _, seq in ctx.corrupted)
            if bad != expected:
                failures.append(f"{name} flagged seqs {bad} as corrupt, expected exactly {expected}")
        return failures
