"""UDP scenarios: a publisher on driver A, a subscriber on driver B (its own aeron dir), one unicast stream
over loopback, and the network or a driver attacked (issue: UDP transport).

The loss generator of driver B (``loss-control.dat``, switched at run time) drops what arrives at or leaves
its endpoints: a random fraction of data, a fixed gap of a term, or every datagram to and from the
publication's sender socket (a partition). Reliable streams must then recover everything acknowledged, by
NAK and retransmit, and the counters must show it.

* udp-random-loss: 10% of the data datagrams dropped for the whole run.
* udp-fixed-gap: a gap in a term not yet sent is dropped once; NAKed, retransmitted, filled.
* udp-partition: a partition for a seeded time, either shorter than the image liveness timeout (the image
  stays, nothing acknowledged is lost) or longer (the image goes, the publication is unconnected, and after
  the heal a new image joins: what follows its join is owed).
* udp-receiver-driver-killed: driver B SIGKILLed; its subscriber sees DriverTimeoutError, a new driver B
  starts over the dir, the subscriber reconnects and the publication on A reconnects to it.
* udp-sender-driver-killed: driver A SIGKILLed; the publisher reconnects to a new driver A (a new
  session); B's old image goes after its liveness timeout and the new session arrives. What was
  acknowledged on the dead session but never sent is lost to that fault (excused); the rest is owed.
"""

from __future__ import annotations

import socket

from aeron_numba.driver.loss_generator import LossSettings
from aeron_numba.layout import counters as cl
from aeron_numba.kernels import position as pos
from aeron_numba.layout.log_buffers import LogBuffers
from chaos import faults
from chaos.scenario import IMAGE_LIVENESS_TIMEOUT_S, UDP_DRIVER_ENV, Scenario
from harness.awaiting import await_condition

TERM_LENGTH = 256 * 1024  # UDP_DRIVER_ENV's AERON_TERM_BUFFER_LENGTH
SND_LOCAL_SOCKADDR = "snd-local-sockaddr"
DRIVER_TIMEOUT_S = 2.0


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class UdpScenario(Scenario):
    driver_env = UDP_DRIVER_ENV

    def start_stream(self, ctx, count: int, *, loss: LossSettings | None = None, reconnect_subscriber: bool = False,
                     reconnect_publisher: bool = False):
        """Driver B (with ``loss`` from the start), the subscriber on it, then the publisher on A: returns
        (subscriber, publisher)."""
        ctx.start_peer_driver()
        if loss is not None:
            faults.set_loss(ctx, ctx.peer.aeron_dir, loss, "from the start")
        port = free_udp_port()
        ctx.metrics["udp_port"] = port
        channel = f"aeron:udp?endpoint=127.0.0.1:{port}"
        sub = ctx.start_subscriber("subB", channel=channel, on_peer=True, reconnect=reconnect_subscriber)
        sub.await_ready()
        publisher = ctx.start_publisher("pub0", 0, count, interval_us=ctx.rng.choice([100, 200, 300]),
                                        channel=channel, reconnect=reconnect_publisher, max_length=2000)
        publisher.await_ready()
        return sub, publisher

    def peer_system_counter(self, ctx, system_id: int) -> int:
        return ctx.peer.counters.value(system_id)  # a system counter's id is its §9.5 id

    def record_recovery_counters(self, ctx) -> None:
        """At the end of ``run`` (the drivers' counters are closed before ``check``)."""
        ctx.metrics.update(naks_sent=self.peer_system_counter(ctx, cl.NAK_MESSAGES_SENT),
                           naks_received=ctx.counters.value(cl.NAK_MESSAGES_RECEIVED),
                           retransmits_sent=ctx.counters.value(cl.RETRANSMITS_SENT),
                           loss_gap_fills=self.peer_system_counter(ctx, cl.LOSS_GAP_FILLS))

    def check_recovery_counters(self, ctx, what: str) -> list[str]:
        """Loss was injected on B: B must have NAKed, A received the NAKs and retransmitted, nothing gap-filled."""
        m = ctx.metrics
        failures = [f"{name} is 0 after {what}" for name, key in (
            ("NAKs sent by driver B", "naks_sent"), ("NAKs received by driver A", "naks_received"),
            ("retransmits sent by driver A", "retransmits_sent")) if m[key] == 0]
        if m["loss_gap_fills"]:
            failures.append(f"{m['loss_gap_fills']} gap fills on a reliable stream")
        return failures


class UdpRandomLoss(UdpScenario):
    name = "udp-random-loss"
    summary = "10% of the UDP data datagrams dropped at the receiver: NAK and retransmit, nothing lost"

    def run(self, ctx):
        count = ctx.rng.randint(1500, 3000) if ctx.quick else ctx.rng.randint(8000, 15000)
        _, publisher = self.start_stream(ctx, count, loss=LossSettings(receive_data_rate=0.10, seed=ctx.seed))
        publisher.process.wait(120)
        self.record_recovery_counters(ctx)

    def check(self, ctx, before, after):
        return self.check_recovery_counters(ctx, "10% injected loss")


class UdpFixedGap(UdpScenario):
    name = "udp-fixed-gap"
    summary = "a fixed gap of a term not yet sent dropped once at the receiver: NAKed, retransmitted, filled"

    def run(self, ctx):
        sub, publisher = self.start_stream(ctx, 0)
        faults.await_acked(ctx, publisher, ctx.rng.randint(100, 400))
        hwm = ctx.peer.counters.await_counter(30, type_id=cl.RECEIVER_HWM_TYPE_ID)
        initial_term_id = self._initial_term_id(ctx)
        bits = TERM_LENGTH.bit_length() - 1
        position = ctx.peer.counters.value(hwm.counter_id)
        term_id = pos.compute_term_id_from_position(position, bits, initial_term_id) + 1  # not sent yet
        length = ctx.rng.randrange(1024, 16 * 1024, 32)
        offset = ctx.rng.randrange(0, TERM_LENGTH - length, 32)
        naks_before = self.peer_system_counter(ctx, cl.NAK_MESSAGES_SENT)
        faults.set_loss(ctx, ctx.peer.aeron_dir, LossSettings(gap_term_id=term_id, gap_term_offset=offset,
                                                              gap_length=length), "fixed gap")
        gap_end = pos.compute_position(term_id, offset + length, bits, initial_term_id)
        workers = [publisher.process, sub.process]
        await_condition(lambda: self.peer_system_counter(ctx, cl.NAK_MESSAGES_SENT) > naks_before, 60,
                        "driver B to NAK the gap", processes=workers)
        naked = ctx.timeline.event("observed", what="driver B NAKed")["ts_ns"]
        rcv_pos = ctx.peer.counters.await_counter(30, type_id=cl.RECEIVER_POSITION_TYPE_ID)
        await_condition(lambda: ctx.peer.counters.value(rcv_pos.counter_id) > gap_end, 60,
                        "driver B's rcv-pos past the gap", processes=workers)
        recovered = ctx.timeline.event("observed", what="rcv-pos past the gap")["ts_ns"]
        ctx.record_recovery(naked, recovered, "NAK seen to rcv-pos past the gap")
        ctx.metrics.update(gap_term_id=term_id, gap_term_offset=offset, gap_length=length)
        ctx.stop_worker(publisher)
        self.record_recovery_counters(ctx)

    def _initial_term_id(self, ctx) -> int:
        (path,) = list((ctx.peer.aeron_dir / "images").glob("*.logbuffer"))
        with LogBuffers.open(path) as log:
            return log.initial_term_id

    def check(self, ctx, before, after):
        return self.check_recovery_counters(ctx, "a fixed gap")


class UdpPartition(UdpScenario):
    name = "udp-partition"
    summary = "partition between the drivers, shorter or longer than the image liveness timeout, then heal"

    def run(self, ctx):
        sub, publisher = self.start_stream(ctx, 0)
        faults.await_acked(ctx, publisher, ctx.rng.randint(100, 600))
        long = ctx.rng.random() < 0.5
        duration = ctx.rng.uniform(IMAGE_LIVENESS_TIMEOUT_S + 1.0, IMAGE_LIVENESS_TIMEOUT_S + 2.5) if long \
            else ctx.rng.uniform(0.3, IMAGE_LIVENESS_TIMEOUT_S - 1.5)
        ctx.metrics.update(partition_s=round(duration, 3), outlasts_image_liveness=long)
        sender_port = self._sender_port(ctx)
        images_before = sub.count("image")
        received_before = sub.count("recv")
        faults.set_loss(ctx, ctx.peer.aeron_dir, LossSettings(blocked_ports=(sender_port,)), "partition")
        faults.hold(duration)
        healed_ts = faults.set_loss(ctx, ctx.peer.aeron_dir, LossSettings(), "heal")
        ctx.metrics["images_gone_during_partition"] = sub.count("image_gone")
        sent_at_heal = publisher.count("sent")
        await_condition(lambda: any(e["event"] == "recv" and e["seq"] >= sent_at_heal for e in sub.events()), 60,
                        "the subscriber to receive what is sent after the heal",
                        processes=[publisher.process, sub.process])
        recovered = ctx.timeline.event("observed", what="message sent after the heal received")["ts_ns"]
        ctx.record_recovery(healed_ts, recovered, "heal to a message sent after it received")
        ctx.metrics.update(images_after=sub.count("image") - images_before,
                           received_during_and_after=sub.count("recv") - received_before)
        faults.await_acked(ctx, publisher, publisher.count("sent") + ctx.rng.randint(100, 300))
        ctx.stop_worker(publisher)

    def _sender_port(self, ctx) -> int:
        info = ctx.counters.await_counter(30, type_id=cl.LOCAL_SOCKET_ADDRESS_STATUS_TYPE_ID,
                                          label_contains=SND_LOCAL_SOCKADDR)
        return int(info.label.rsplit(":", 1)[1])

    def check(self, ctx, before, after):
        gone = ctx.metrics["images_gone_during_partition"]
        if ctx.metrics["outlasts_image_liveness"]:
            if gone != 1 or ctx.metrics["images_after"] != 1:
                return [f"a partition of {ctx.metrics['partition_s']}s > image liveness "
                        f"{IMAGE_LIVENESS_TIMEOUT_S}s: {gone} images gone and {ctx.metrics['images_after']} "
                        "new ones, expected 1 and 1"]
        elif gone != 0:
            return [f"a partition of {ctx.metrics['partition_s']}s < image liveness {IMAGE_LIVENESS_TIMEOUT_S}s "
                    f"took the image away ({gone} image_gone)"]
        return []


class UdpReceiverDriverKilled(UdpScenario):
    name = "udp-receiver-driver-killed"
    summary = "SIGKILL the subscriber's driver; a new one starts, the subscriber and the publication reconnect"

    def run(self, ctx):
        sub, publisher = self.start_stream(ctx, 0, reconnect_subscriber=True)
        faults.await_acked(ctx, publisher, ctx.rng.randint(100, 600))
        killed = faults.kill_peer_driver(ctx)
        await_condition(lambda: any(e["event"] == "client_error" for e in sub.events()), DRIVER_TIMEOUT_S + 15,
                        "the subscriber to report its dead driver", processes=[sub.process])
        ctx.start_peer_driver("driver-b2")
        await_condition(lambda: any(e["event"] == "recv" and e.get("incarnation", 0) >= 1 for e in sub.events()),
                        60, "the reconnected subscriber to receive over UDP", processes=[sub.process, publisher.process])
        recovered = ctx.timeline.event("observed", what="reconnected subscriber received")["ts_ns"]
        ctx.record_recovery(killed, recovered, "receiver driver kill to first message through the new one")
        faults.await_acked(ctx, publisher, publisher.count("sent") + ctx.rng.randint(200, 500))
        ctx.stop_worker(publisher)

    def check(self, ctx, before, after):
        errors = [e["error"] for e in ctx.workers["subB"].events() if e["event"] == "client_error"]
        return [] if errors == ["DriverTimeoutError"] else [f"subB client errors {errors}, expected [DriverTimeoutError]"]


class UdpSenderDriverKilled(UdpScenario):
    name = "udp-sender-driver-killed"
    summary = "SIGKILL the publisher's driver; a new one starts, the publisher reconnects, a new image arrives"

    def run(self, ctx):
        sub, publisher = self.start_stream(ctx, 0, reconnect_publisher=True)
        faults.await_acked(ctx, publisher, ctx.rng.randint(100, 600))
        killed = faults.kill_driver(ctx)
        old_sessions = {e["session"] for e in publisher.events() if e["event"] == "publication"}
        ctx.excused_sessions |= old_sessions
        await_condition(lambda: any(e["event"] == "client_error" for e in publisher.events()),
                        DRIVER_TIMEOUT_S + 15, "the publisher to report its dead driver", processes=[publisher.process])
        ctx.start_driver("driver2")
        ctx.counters_baseline = ctx.counter_snapshot("before")

        def new_session_received():
            return any(e["event"] == "recv" and e["session"] not in old_sessions for e in sub.events())

        await_condition(new_session_received, 60, "the subscriber to receive the new session",
                        processes=[sub.process, publisher.process])
        recovered = ctx.timeline.event("observed", what="new session received")["ts_ns"]
        ctx.record_recovery(killed, recovered, "sender driver kill to first message of the new session")
        await_condition(lambda: sub.count("image_gone") >= 1, IMAGE_LIVENESS_TIMEOUT_S + 15,
                        "the dead session's image to go", processes=[sub.process])
        faults.await_acked(ctx, publisher, publisher.count("sent") + ctx.rng.randint(200, 500))
        ctx.stop_worker(publisher)
        ctx.metrics["excused_sessions"] = sorted(old_sessions)

    def check(self, ctx, before, after):
        errors = [e["error"] for e in ctx.workers["pub0"].events() if e["event"] == "client_error"]
        return [] if errors == ["DriverTimeoutError"] else [f"pub0 client errors {errors}, expected [DriverTimeoutError]"]
