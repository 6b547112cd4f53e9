"""Publisher and subscriber processes for the integration tests.

Every message is checkable on its own: publisher ``p``'s message ``i`` has a length drawn from a seeded
log-uniform distribution (1 byte .. max length, so many are fragmented), bytes ``(p*7 + i*13 + j) & 0xFF``
and reserved value ``p << 40 | i``. A subscriber checks order per publisher, length and every byte.

    python -m tests.integration.pubsub_worker publish --dir D --stream S --id P --count N --seed K [--exclusive]
    python -m tests.integration.pubsub_worker subscribe --dir D --stream S --publishers 0,1 --count N --seed K --out F
    python -m tests.integration.pubsub_worker claim-and-die --dir D --stream S
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

import numpy as np

from aeron_numba.client import Aeron, Context, FragmentAssembler
from aeron_numba.layout import publication_status as P
from harness.awaiting import ConditionTimeout, await_condition

SEQ_BITS = 40
MAX_LENGTH = 64 * 1024
IDLE_S = 0.0001  # the subscriber's back-off when a poll finds nothing


def message_lengths(seed: int, publisher_id: int, count: int, max_length: int) -> np.ndarray:
    rng = np.random.default_rng([seed, publisher_id])
    return np.exp(rng.uniform(0.0, np.log(max_length + 1), size=count)).astype(np.int64).clip(1, max_length)


def message_bytes(publisher_id: int, seq: int, length: int) -> np.ndarray:
    return ((publisher_id * 7 + seq * 13 + np.arange(length, dtype=np.int64)) & 0xFF).astype(np.uint8)


def _context(args) -> Context:
    return Context(aeron_dir=args.dir, driver_timeout_ms=args.driver_timeout_ms)


def publish(args) -> int:
    lengths = message_lengths(args.seed, args.id, args.count, args.max_length)
    back_pressured = 0
    with Aeron.connect(_context(args)) as aeron:
        add = aeron.add_exclusive_publication if args.exclusive else aeron.add_publication
        publication = add(args.channel, args.stream)
        deadline = time.monotonic() + args.timeout  # for the whole run: connecting and every offer
        try:
            await_condition(lambda: publication.is_connected, args.timeout, "a subscriber to connect")
        except ConditionTimeout:
            print("no subscriber connected", file=sys.stderr)
            return 2
        print("ready", flush=True)
        for seq in range(args.count):
            data = message_bytes(args.id, seq, int(lengths[seq]))
            reserved = (args.id << SEQ_BITS) | seq
            while True:
                result = publication.offer(data, reserved_value=reserved)
                if result > 0:
                    break
                if result == P.BACK_PRESSURED:
                    back_pressured += 1
                elif result not in (P.ADMIN_ACTION, P.NOT_CONNECTED):
                    print(f"offer failed: {P.STATUS_NAMES.get(result, result)}", file=sys.stderr)
                    return 3
                if time.monotonic() > deadline:
                    print(f"stuck at seq {seq}", file=sys.stderr)
                    return 4
                time.sleep(0) if result == P.ADMIN_ACTION else time.sleep(0.0001)
        print(f"published {args.count} back_pressured {back_pressured}", flush=True)
        publication.close()
    return 0


def subscribe(args) -> int:
    publishers = [int(p) for p in args.publishers.split(",")]
    lengths = {p: message_lengths(args.seed, p, args.count, args.max_length) for p in publishers}
    next_seq = {p: 0 for p in publishers}
    errors: list[str] = []

    def on_message(buffer, offset, length, header) -> None:
        reserved = header.reserved_value
        publisher_id, seq = reserved >> SEQ_BITS, reserved & ((1 << SEQ_BITS) - 1)
        if publisher_id not in next_seq:
            errors.append(f"unknown publisher {publisher_id}")
            return
        if seq != next_seq[publisher_id]:
            errors.append(f"publisher {publisher_id}: seq {seq}, expected {next_seq[publisher_id]}")
        elif length != lengths[publisher_id][seq]:
            errors.append(f"publisher {publisher_id} seq {seq}: length {length}, expected {lengths[publisher_id][seq]}")
        elif not np.array_equal(buffer[offset : offset + length], message_bytes(publisher_id, seq, length)):
            errors.append(f"publisher {publisher_id} seq {seq}: payload differs")
        next_seq[publisher_id] = seq + 1

    total = args.count * len(publishers)
    assembler = FragmentAssembler(on_message)
    with Aeron.connect(_context(args)) as aeron:
        subscription = aeron.add_subscription(args.channel, args.stream)
        print("ready", flush=True)
        try:  # every message, or enough errors to stop; a timeout is reported in the output like any error
            await_condition(lambda: sum(next_seq.values()) >= total or len(errors) >= 10, args.timeout,
                            "every publisher's messages", work=lambda: subscription.poll(assembler.on_fragment, 256),
                            poll_interval_s=IDLE_S, max_poll_interval_s=IDLE_S)
        except ConditionTimeout:
            errors.append(f"timed out with {next_seq}")
        with open(args.out, "w") as out:
            json.dump({"received": next_seq, "errors": errors}, out)
    return 0 if not errors else 5


def claim_and_die(args) -> int:
    """Claim space in a concurrent publication and die before committing it (§15.1)."""
    with Aeron.connect(_context(args)) as aeron:
        publication = aeron.add_publication(args.channel, args.stream)
        try:
            await_condition(lambda: publication.is_connected, args.timeout, "a subscriber to connect")
        except ConditionTimeout:
            pass  # try_claim below says NOT_CONNECTED
        claim = publication.try_claim(100)
        if isinstance(claim, int):
            print(f"try_claim failed: {claim}", file=sys.stderr)
            return 6
        print(f"claimed at {publication.position}", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return 7


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["publish", "subscribe", "claim-and-die"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--channel", default="aeron:ipc")
    parser.add_argument("--stream", type=int, default=1001)
    parser.add_argument("--id", type=int, default=0)
    parser.add_argument("--publishers", default="0")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=MAX_LENGTH)
    parser.add_argument("--exclusive", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--driver-timeout-ms", type=int, default=5000)
    args = parser.parse_args(argv)
    return {"publish": publish, "subscribe": subscribe, "claim-and-die": claim_and_die}[args.role](args)


if __name__ == "__main__":
    sys.exit(main())
