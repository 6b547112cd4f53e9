"""Chaos workload worker processes: a publisher, a subscriber and a claim-and-die publisher.

Each worker appends its events to a JSON-lines file (``--log``, see chaos/TIMELINE.md): ``connected``,
``sent`` (one per message acknowledged by ``offer`` with a positive position), ``recv`` (one per message
received, with its position), ``image``, ``client_error``, ``done``. Message ``seq`` of publisher ``pub`` has
a seeded length in [16, max_length] (kept below the MTU: never fragmented), starts with the int64 pair
(pub, seq), continues with bytes ``(pub*7 + seq*13 + j) & 0xFF``, and carries reserved value ``pub<<40 | seq``.

    python -m chaos.workload publish --dir D --name pub0 --log F --pub 0 --count N --seed S  (N=0: until SIGTERM)
    python -m chaos.workload subscribe --dir D --name subA --log F [--poll-sleep-us U]
    python -m chaos.workload claim-and-die --dir D --name claimer --log F
    python -m chaos.workload garbage --dir D --name rogue --log F --seed S --duration-s T [--raw-every K]

A subscriber runs until SIGTERM; SIGUSR2 toggles a stall (it stops polling but its client stays alive and
keeps heartbeating, logging ``stalled`` / ``resumed``). ``claim-and-die`` connects, prints ``ready``, waits for SIGUSR1, then
claims a frame and SIGKILLs itself before committing it. With ``--reconnect`` a publisher or subscriber
whose client ends (ClientTimeoutError, ConductorServiceTimeoutError, DriverTimeoutError) logs it,
connects again and carries on; a publisher resends the message that was not acknowledged.
With ``--huge-every K`` every K-th message of a publisher is as long as the publication allows
(``max_message_length``, fragmented), and before the first of them it offers one byte more, which must raise
``MessageTooLongError`` (logged as ``too_long``). ``--exclusive`` publishes on an exclusive publication (its
own log and session) instead of the shared one. With ``--retry-add`` a publisher whose ``add_publication``
the driver refuses logs ``add_failed`` (error code and message) and tries again every 50 ms.

``garbage`` is a rogue process, not an Aeron client: it maps cnc.dat and, for ``--duration-s``, writes
seeded random records into the to-driver ring buffer (random type ids, half of them in the command id
range, random bodies, via the ring buffer ``write`` kernel); every ``--raw-every``-th record it claims a
slot and overwrites it, header included, with raw random bytes whose length field is impossible (< 8 or
> capacity) — it writes only inside its own claim, since the ring buffer protocol needs the free area
zeroed and other producers' records intact. It logs ``garbage`` (``records, raw, full``) and ``done``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import zlib

import numpy as np

from aeron_numba.client import Aeron, Context, FragmentAssembler
from aeron_numba.errors import AeronError, MessageTooLongError, RegistrationError
from aeron_numba.kernels import atomics_for_python
from aeron_numba.layout import control_protocol as cp
from aeron_numba.layout import publication_status as P
from chaos.timeline import Timeline
from harness.driver_settings import DRIVER_TIMEOUT_MS

SEQ_BITS = 40
HEADER_BYTES = 16
DEFAULT_MAX_LENGTH = 1000
CHANNEL = "aeron:ipc"
MAX_COMMAND_TYPE_ID = cp.REMOVE_DESTINATION_BY_ID  # the highest §11.1 command id: above it, always "unknown"


def message_length(seed: int, pub: int, seq: int, max_length: int) -> int:
    """A seeded length in [HEADER_BYTES, max_length], computed per message (publishers may run unbounded)."""
    mixed = (seed * 1_000_003 + pub * 7_919 + seq * 2_654_435_761) & 0xFFFFFFFF
    mixed = ((mixed ^ (mixed >> 16)) * 0x45D9F3B) & 0xFFFFFFFF
    return HEADER_BYTES + (mixed ^ (mixed >> 16)) % (max_length - HEADER_BYTES + 1)


def message_bytes(pub: int, seq: int, length: int) -> np.ndarray:
    data = ((pub * 7 + seq * 13 + np.arange(length, dtype=np.int64)) & 0xFF).astype(np.uint8)
    data[:HEADER_BYTES].view(np.int64)[:] = (pub, seq)
    return data


class _Stop:
    def __init__(self):
        self.requested = False
        self.usr1 = False
        self.stalled = False

    def install(self) -> "_Stop":
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "requested", True))
        signal.signal(signal.SIGUSR1, lambda *_: setattr(self, "usr1", True))
        signal.signal(signal.SIGUSR2, lambda *_: setattr(self, "stalled", not self.stalled))
        return self


def _connect(args, log: Timeline, incarnation: int, deadline: float) -> Aeron:
    """Connect, retrying DriverTimeoutError (a driver being restarted) until ``deadline`` with --reconnect."""
    while True:
        try:
            aeron = Aeron.connect(Context(aeron_dir=args.dir, driver_timeout_ms=args.driver_timeout_ms,
                                          error_handler=lambda e: None))
            log.event("connected", incarnation=incarnation, client_id=aeron.client_id, pid=os.getpid())
            return aeron
        except AeronError as exc:
            log.event("connect_failed", incarnation=incarnation, error=type(exc).__name__, message=str(exc))
            if not args.reconnect or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _end_cause(aeron: Aeron) -> str:
    cause = aeron.conductor.termination_cause
    return type(cause).__name__ if cause is not None else "ClientClosedError"


def publish(args) -> int:
    log = Timeline(args.log, args.name)
    stop = _Stop().install()
    deadline = time.monotonic() + args.timeout
    back_pressured = not_connected = 0
    seq = 0
    too_long_checked = False
    incarnation = 0
    interval_s = args.interval_us / 1e6
    while True:
        aeron = _connect(args, log, incarnation, deadline)
        try:
            publication = _add_publication(aeron, args, log, deadline)
            while not publication.is_connected and time.monotonic() < deadline and not aeron.is_closed:
                time.sleep(0.001)
            log.event("publication", incarnation=incarnation, session=publication.session_id,
                      stream=args.stream, registration_id=publication.registration_id, mtu=publication.mtu_length)
            print("ready", flush=True)
            while (args.count == 0 or seq < args.count) and not stop.requested:
                length = message_length(args.seed, args.pub, seq, args.max_length)
                if args.huge_every > 0 and seq % args.huge_every == args.huge_every - 1:
                    length = publication.max_message_length
                    if not too_long_checked:
                        too_long_checked = True
                        if not _offer_too_long(publication, log, seq):
                            return 3
                data = message_bytes(args.pub, seq, length)
                result = publication.offer(data, reserved_value=(args.pub << SEQ_BITS) | seq)
                if result > 0:
                    # crc32: what a verifier compares recorded bytes against without knowing the fill pattern
                    log.event("sent", pub=args.pub, seq=seq, position=int(result), session=publication.session_id,
                              length=length, incarnation=incarnation, crc32=zlib.crc32(data))
                    seq += 1
                    if interval_s > 0:
                        time.sleep(interval_s)
                    continue
                if result == P.CLOSED or aeron.is_closed:
                    raise _ClientEnded(_end_cause(aeron))
                if result == P.BACK_PRESSURED:
                    back_pressured += 1
                elif result == P.NOT_CONNECTED:
                    not_connected += 1
                elif result != P.ADMIN_ACTION:
                    log.event("offer_failed", status=P.STATUS_NAMES.get(result, result), seq=seq)
                    return 3
                if time.monotonic() > deadline:
                    log.event("stuck", seq=seq, back_pressured=back_pressured, not_connected=not_connected)
                    return 4
                time.sleep(0.0002)
            log.event("done", pub=args.pub, sent=seq, back_pressured=back_pressured, not_connected=not_connected)
            if args.exit_without_close:
                os._exit(0)  # no CLIENT_CLOSE, no REMOVE_PUBLICATION: the driver must time us out
            aeron.close()
            log.close()
            return 0
        except (_ClientEnded, AeronError) as exc:
            error = exc.cause if isinstance(exc, _ClientEnded) else type(exc).__name__
            log.event("client_error", incarnation=incarnation, error=error, seq=seq)
            aeron.close()
            if not args.reconnect:
                return 5
            incarnation += 1


def _add_publication(aeron: Aeron, args, log: Timeline, deadline: float):
    """``add_publication``; with ``--retry-add`` a refusal (e.g. STORAGE_SPACE) is logged and retried."""
    while True:
        try:
            if args.exclusive:
                return aeron.add_exclusive_publication(args.channel, args.stream)
            return aeron.add_publication(args.channel, args.stream)
        except RegistrationError as exc:
            log.event("add_failed", error_code=exc.error_code_name, message=exc.driver_message)
            if not args.retry_add or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _offer_too_long(publication, log: Timeline, seq: int) -> bool:
    """Offer one byte more than the publication allows: it must raise MessageTooLongError, nothing sent."""
    too_long = publication.max_message_length + 1
    try:
        result = publication.offer(np.zeros(too_long, np.uint8))
    except MessageTooLongError as exc:
        log.event("too_long", length=too_long, seq=seq, message=str(exc))
        return True
    log.event("offer_failed", status=f"offer of length={too_long} returned {result} instead of raising", seq=seq)
    return False


class _ClientEnded(Exception):
    def __init__(self, cause: str):
        super().__init__(cause)
        self.cause = cause


def subscribe(args) -> int:
    log = Timeline(args.log, args.name)
    stop = _Stop().install()
    deadline = time.monotonic() + args.timeout
    poll_sleep_s = args.poll_sleep_us / 1e6
    incarnation = 0
    state = {"received": 0, "bad": 0}

    def on_message(buffer, offset, length, header) -> None:
        pub, seq = (int(v) for v in buffer[offset : offset + HEADER_BYTES].view(np.int64))
        ok = (header.reserved_value == (pub << SEQ_BITS) | seq
              and np.array_equal(buffer[offset : offset + length], message_bytes(pub, seq, length)))
        log.event("recv", pub=pub, seq=seq, position=int(header.position), session=header.session_id,
                  length=int(length), incarnation=incarnation, **({} if ok else {"bad_payload": True}))
        state["received"] += 1
        state["bad"] += 0 if ok else 1

    assembler = FragmentAssembler(on_message)
    while True:
        aeron = _connect(args, log, incarnation, deadline)
        try:
            inc = incarnation
            subscription = aeron.add_subscription(
                args.channel, args.stream,
                available_image_handler=lambda image: log.event(
                    "image", incarnation=inc, session=image.session_id, join_position=image.join_position),
                unavailable_image_handler=lambda image: log.event(
                    "image_gone", incarnation=inc, session=image.session_id))
            log.event("subscription", incarnation=incarnation, stream=args.stream,
                      registration_id=subscription.registration_id)
            print("ready", flush=True)
            while not stop.requested:
                if stop.stalled:
                    _stall(stop, log, incarnation)
                    continue
                fragments = subscription.poll(assembler.on_fragment, args.fragment_limit)
                if fragments == 0:
                    if aeron.is_closed:
                        raise _ClientEnded(_end_cause(aeron))
                    time.sleep(0.0002)
                elif poll_sleep_s > 0:
                    time.sleep(poll_sleep_s)  # a slow consumer
            log.event("done", received=state["received"], bad=state["bad"], incarnation=incarnation)
            aeron.close()
            log.close()
            return 0
        except (_ClientEnded, AeronError) as exc:
            error = exc.cause if isinstance(exc, _ClientEnded) else type(exc).__name__
            log.event("client_error", incarnation=incarnation, error=error)
            aeron.close()
            if not args.reconnect:
                return 5
            incarnation += 1


def _stall(stop: _Stop, log: Timeline, incarnation: int) -> None:
    """Stop polling until SIGUSR2 (or SIGTERM) comes; the client conductor thread keeps the client alive."""
    log.event("stalled", incarnation=incarnation)
    while stop.stalled and not stop.requested:
        time.sleep(0.001)
    log.event("resumed", incarnation=incarnation)


def claim_and_die(args) -> int:
    """Wait for SIGUSR1, claim a frame in the shared publication and SIGKILL ourselves before committing."""
    log = Timeline(args.log, args.name)
    stop = _Stop().install()
    deadline = time.monotonic() + args.timeout
    aeron = _connect(args, log, 0, deadline)
    publication = aeron.add_publication(CHANNEL, args.stream)
    while not publication.is_connected and time.monotonic() < deadline:
        time.sleep(0.001)
    log.event("publication", incarnation=0, session=publication.session_id, stream=args.stream,
              registration_id=publication.registration_id, mtu=publication.mtu_length)
    print("ready", flush=True)
    while not stop.usr1:
        if time.monotonic() > deadline:
            return 4
        time.sleep(0.001)
    while True:
        claim = publication.try_claim(100)
        if not isinstance(claim, int):
            break
        if time.monotonic() > deadline:
            log.event("stuck", status=P.STATUS_NAMES.get(claim, claim))
            return 4
        time.sleep(0.0002)
    log.event("claimed", position=int(claim.position), session=publication.session_id)
    log.close()
    os.kill(os.getpid(), signal.SIGKILL)
    return 7


def garbage(args) -> int:
    """Write seeded random records and raw bytes into the to-driver buffer for ``--duration-s``."""
    import random

    from aeron_numba.kernels.cnc_file import CncFile
    from aeron_numba.kernels import ring_buffer as rb
    from aeron_numba.layout import ring_buffer as rbl

    log = Timeline(args.log, args.name)
    stop = _Stop().install()
    rng = random.Random(args.seed * 31 + 7)
    cnc_file = CncFile.open(os.path.join(args.dir, "cnc.dat"))
    ring = rb.ManyToOneRingBuffer(cnc_file.to_driver_buffer)
    buf, capacity = ring.buffer, ring.capacity
    print("ready", flush=True)
    records = raw = full = unknown_type = 0
    end = time.monotonic() + args.duration_s
    interval_s = args.interval_us / 1e6
    while time.monotonic() < end and not stop.requested:
        length = rng.randint(0, 512)
        body = np.frombuffer(rng.randbytes(length), dtype=np.uint8) if length else np.zeros(0, np.uint8)
        msg_type_id = rng.randint(1, 2 * MAX_COMMAND_TYPE_ID) if rng.random() < 0.5 else rng.randint(1, 2**31 - 1)
        if args.raw_every > 0 and (records + raw) % args.raw_every == args.raw_every - 1:
            index = ring.try_claim(msg_type_id, length)
            if index < 0:
                full += 1
            else:
                record_index = index - rbl.RECORD_HEADER_LENGTH
                buf[record_index : index + length] = np.frombuffer(rng.randbytes(length + rbl.RECORD_HEADER_LENGTH),
                                                                   dtype=np.uint8)
                # A positive but impossible length: the driver must skip it (0 or < 0 would be a claim in
                # progress, which it only unblocks after the liveness timeout, stalling every client).
                bad = rng.randint(1, rbl.RECORD_HEADER_LENGTH - 1) if rng.random() < 0.5 else rng.randint(
                    capacity + 1, 2**31 - 1)
                atomics_for_python.put_int32_release(buf, record_index + rbl.RECORD_LENGTH_OFFSET, bad)
                raw += 1
        elif ring.write(msg_type_id, body):
            records += 1
            unknown_type += msg_type_id > MAX_COMMAND_TYPE_ID
        else:
            full += 1
        time.sleep(interval_s)
    log.event("garbage", records=records, unknown_type=unknown_type, raw=raw, full=full)
    log.event("done", records=records, raw=raw)
    log.close()
    cnc_file.close()
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos.workload")
    parser.add_argument("role", choices=["publish", "subscribe", "claim-and-die", "garbage"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--stream", type=int, default=1001)
    parser.add_argument("--channel", default=CHANNEL, help="channel URI (e.g. tether=false for a subscriber, aeron:udp?endpoint=...)")
    parser.add_argument("--pub", type=int, default=0)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=DEFAULT_MAX_LENGTH)
    parser.add_argument("--interval-us", type=float, default=0.0, help="pause after each acknowledged offer")
    parser.add_argument("--poll-sleep-us", type=float, default=0.0, help="subscriber: sleep after each poll")
    parser.add_argument("--fragment-limit", type=int, default=256)
    parser.add_argument("--reconnect", action="store_true")
    parser.add_argument("--exit-without-close", action="store_true")
    parser.add_argument("--huge-every", type=int, default=0, help="publisher: every K-th message max length")
    parser.add_argument("--exclusive", action="store_true", help="publisher: an exclusive publication (own log)")
    parser.add_argument("--retry-add", action="store_true", help="publisher: retry a refused add_publication")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--driver-timeout-ms", type=int, default=DRIVER_TIMEOUT_MS)
    parser.add_argument("--duration-s", type=float, default=3.0, help="garbage: how long to write")
    parser.add_argument("--raw-every", type=int, default=50, help="garbage: every K-th record is raw bytes")
    args = parser.parse_args(argv)
    return {"publish": publish, "subscribe": subscribe, "claim-and-die": claim_and_die,
            "garbage": garbage}[args.role](args)


if __name__ == "__main__":
    sys.exit(main())
