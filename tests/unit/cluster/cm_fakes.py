"""Fakes around a ConsensusModuleAgent: an Aeron client whose publications decode and keep what is offered, a
subscription a test feeds encoded messages into, counters, an archive whose recordings make rec-pos counters, and
a service that acks what the consensus module asks. Everything is plain Python, so a test states exactly what
the world reports and reads exactly what the agent sent (decoded by the real schema-111 codec)."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

import numpy as np

from aeron_numba.client.fragment_assembler import ABORT
from aeron_numba.client.header import Header
from aeron_numba.cluster.cluster_time import ClusterClock, ClusterTimeUnit
from aeron_numba.cluster.context import ConsensusModuleContext
from aeron_numba.codecs.channel_uri import parse_size
from aeron_numba.codecs.cluster_messages import CLUSTER
from aeron_numba.layout import archive as A
from aeron_numba.layout import frame
from aeron_numba.layout.publication_status import BACK_PRESSURED, NOT_CONNECTED


def whole_message_header(position: int = 0) -> Header:
    """The header of one unfragmented frame (BEGIN and END flags set) ending at ``position``."""
    buffer = np.zeros(frame.HEADER_LENGTH, dtype=np.uint8)
    buffer[frame.FLAGS_FIELD_OFFSET] = frame.UNFRAGMENTED
    header = Header(buffer=buffer)
    header.position = position
    return header


class FakeCounter:
    def __init__(self, value: int = 0):
        self.value = value
        self.closed = False

    def get(self) -> int:
        return self.value

    def set(self, value: int) -> None:
        self.value = value

    def increment(self) -> int:
        self.value += 1
        return self.value - 1

    def compare_and_set(self, expected: int, update: int) -> bool:
        if self.value == expected:
            self.value = update
            return True
        return False

    def close(self) -> None:
        self.closed = True


COUNTER_NAMES = ("errors", "module_state", "election_state", "election_count", "leadership_term_id", "cluster_role",
                 "commit_position", "control_toggle", "snapshot_counter", "timed_out_client_counter",
                 "max_cycle_time", "cycle_time_threshold_exceeded")


class FakeCounters:
    def __init__(self):
        for name in COUNTER_NAMES:
            setattr(self, name, FakeCounter())


class FakePublication:
    """Decodes and keeps each offered message; ``accept`` False answers BACK_PRESSURED, ``connected`` False
    NOT_CONNECTED."""

    def __init__(self, channel: str, stream_id: int, session_id: int):
        self.channel, self.stream_id, self.session_id = channel, stream_id, session_id
        self.messages: list = []
        self.position = 0
        self.accept = True
        self.connected = True
        self.closed = False
        self.destinations: list[str] = []

    @property
    def is_connected(self) -> bool:
        return self.connected and not self.closed

    def offer(self, buffer, offset: int, length: int) -> int:
        if self.closed or not self.connected:
            return NOT_CONNECTED
        if not self.accept:
            return BACK_PRESSURED
        self.messages.append(CLUSTER.decode(buffer, offset, length))
        self.position += (32 + length + 31) & ~31
        return self.position

    def names(self) -> list[str]:
        return [type(m).__name__ for m in self.messages]

    def of(self, name: str) -> list:
        return [m for m in self.messages if type(m).__name__ == name]

    def async_add_destination(self, channel: str) -> int:
        self.destinations.append(channel)
        return 1

    add_destination = async_add_destination

    def async_remove_destination(self, channel: str) -> int:
        self.destinations.remove(channel)
        return 1

    def close(self) -> None:
        self.closed = True


class FakeImage:
    def __init__(self, subscription, session_id: int, join_position: int = 0):
        self.subscription = subscription
        self.session_id = session_id
        self.join_position = join_position
        self.position = join_position
        self.is_closed = False
        self.is_end_of_stream = False
        self.term_buffer_length = 64 * 1024
        self.pending: list[bytes] = []

    def controlled_poll(self, handler, limit: int) -> int:
        count = 0
        while self.pending and count < limit:
            data = self.pending[0]
            header = whole_message_header(self.position + ((32 + len(data) + 31) & ~31))
            buffer = np.frombuffer(bytearray(data), dtype=np.uint8)
            action = handler(buffer, 0, len(data), header)
            if action == ABORT:
                break
            self.pending.pop(0)
            self.position = header.position
            count += 1
        return count


class FakeSubscription:
    """``feed(message)`` queues an encoded message for the next poll (whole, as one unfragmented frame)."""

    def __init__(self, channel: str, stream_id: int, registration_id: int):
        self.channel, self.stream_id, self.registration_id = channel, stream_id, registration_id
        self.pending: list[bytes] = []
        self.images: list[FakeImage] = []
        self.destinations: list[str] = []
        self.closed = False
        self.resolved_endpoint = None
        self.channel_status = 1

    def feed(self, message) -> None:
        self.pending.append(CLUSTER.encode(message))

    def _deliver(self, handler, limit: int, controlled: bool) -> int:
        count = 0
        while self.pending and count < limit:
            data = self.pending[0]
            header = whole_message_header()
            buffer = np.frombuffer(bytearray(data), dtype=np.uint8)
            action = handler(buffer, 0, len(data), header)
            if controlled and action == ABORT:
                break
            self.pending.pop(0)
            count += 1
        return count

    def poll(self, handler, limit: int) -> int:
        return self._deliver(handler, limit, False)

    def controlled_poll(self, handler, limit: int) -> int:
        return self._deliver(handler, limit, True)

    def image_by_session_id(self, session_id: int):
        return next((i for i in self.images if i.session_id == session_id), None)

    @property
    def is_closed(self) -> bool:
        return self.closed

    def add_destination(self, channel: str) -> None:
        self.destinations.append(channel)

    def async_remove_destination(self, channel: str) -> None:
        if channel in self.destinations:
            self.destinations.remove(channel)

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeCounterInfo:
    counter_id: int
    type_id: int
    key: bytes
    label: str = ""
    value: int = 0
    registration_id: int = 0


class FakeCountersReader:
    def __init__(self):
        self.counters: dict[int, FakeCounterInfo] = {}

    def for_each(self):
        return list(self.counters.values())

    def get_counter_value(self, counter_id: int) -> int:
        return self.counters[counter_id].value

    def get_counter_registration_id(self, counter_id: int) -> int:
        info = self.counters.get(counter_id)
        return -1 if info is None else info.registration_id

    def get_counter_state(self, counter_id: int) -> int:
        return 1 if counter_id in self.counters else 0

    def get_counter_type_id(self, counter_id: int) -> int:
        return self.counters[counter_id].type_id

    def get_counter_key(self, counter_id: int) -> bytes:
        return self.counters[counter_id].key


class FakeAeron:
    def __init__(self):
        self.publications: list[FakePublication] = []
        self.subscriptions: list[FakeSubscription] = []
        self.counters_reader = FakeCountersReader()
        self.added_counters: list[tuple] = []
        self.client_id = 1000
        self._next_id = 1
        self._session_id = 5000
        self.is_closed = False
        self.response_publications: dict[int, FakePublication] = {}

    def next_correlation_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _publication(self, channel, stream_id) -> FakePublication:
        self._session_id += 1
        publication = FakePublication(channel, stream_id, self._session_id)
        self.publications.append(publication)
        return publication

    def add_exclusive_publication(self, channel: str, stream_id: int) -> FakePublication:
        publication = self._publication(channel, stream_id)
        params = dict(p.split("=", 1) for p in channel.partition("?")[2].split("|") if "=" in p)
        if "term-id" in params and "term-length" in params:  # a log continued at its append position
            term_length = parse_size("term-length", params["term-length"])
            publication.position = ((int(params["term-id"]) - int(params["init-term-id"])) * term_length
                                    + int(params["term-offset"]))
        return publication

    def async_add_publication(self, channel: str, stream_id: int) -> int:
        if "bad" in channel:
            raise ValueError(f"invalid channel {channel}")
        registration_id = self.next_correlation_id()
        self.response_publications[registration_id] = self._publication(channel, stream_id)
        return registration_id

    def get_publication(self, registration_id: int):
        return self.response_publications.get(registration_id)

    def async_remove_publication(self, registration_id: int) -> None:
        self.response_publications.pop(registration_id, None)

    def add_subscription(self, channel: str, stream_id: int) -> FakeSubscription:
        subscription = FakeSubscription(channel, stream_id, self.next_correlation_id())
        self.subscriptions.append(subscription)
        return subscription

    def add_counter(self, type_id: int, key: bytes = b"", label: str = "") -> FakeCounter:
        self.added_counters.append((type_id, bytes(key), label))
        return FakeCounter()

    def publication(self, stream_id: int, channel_part: str = "") -> FakePublication:
        return [p for p in self.publications if p.stream_id == stream_id and channel_part in p.channel][-1]

    def subscription(self, stream_id: int, channel_part: str = "") -> FakeSubscription:
        return [s for s in self.subscriptions if s.stream_id == stream_id and channel_part in s.channel][-1]


ARCHIVE_ID = 7


class FakeArchive:
    """Recordings start as rec-pos counters in the fake counters reader (recording id counted from 0)."""

    def __init__(self, aeron: FakeAeron):
        self.aeron = aeron
        self.recordings: dict[int, dict] = {}
        self.calls: list[tuple] = []
        self.signals: list = []
        self.errors: list[str] = []

    def get_archive_id(self) -> int:
        return ARCHIVE_ID

    def _rec_pos(self, recording_id: int, session_id: int) -> None:
        key = struct.pack("<qii", recording_id, session_id, 0) + struct.pack("<q", ARCHIVE_ID)
        counter_id = 100 + recording_id
        self.aeron.counters_reader.counters[counter_id] = FakeCounterInfo(
            counter_id, A.RECORDING_POSITION_TYPE_ID, key, registration_id=900 + recording_id)

    def start_recording(self, channel, stream_id, source_location="LOCAL", auto_stop=False) -> int:
        self.calls.append(("start_recording", channel, stream_id, source_location, auto_stop))
        recording_id = len(self.recordings)
        session_id = int(re.search(r"session-id=(-?\d+)", channel).group(1))
        self.recordings[recording_id] = {"session_id": session_id, "stop_position": -1, "start_position": 0}
        self._rec_pos(recording_id, session_id)
        return 500 + recording_id

    def extend_recording(self, recording_id, channel, stream_id, source_location="LOCAL", auto_stop=False) -> int:
        self.calls.append(("extend_recording", recording_id, channel, stream_id, source_location, auto_stop))
        session_id = int(re.search(r"session-id=(-?\d+)", channel).group(1))
        self._rec_pos(recording_id, session_id)
        return 600 + recording_id

    def add_recording(self, recording_id: int, session_id: int) -> None:
        """An active recording of ``session_id``, as the archive has it once an image is recorded."""
        self.recordings[recording_id] = {"session_id": session_id, "stop_position": -1, "start_position": 0}
        self._rec_pos(recording_id, session_id)

    def stop_recording_by_identity(self, recording_id: int) -> bool:
        self.calls.append(("stop_recording_by_identity", recording_id))
        info = self.aeron.counters_reader.counters.pop(100 + recording_id, None)
        if info is not None:
            self.recordings[recording_id]["stop_position"] = info.value
        return info is not None

    def stop_recording_subscription(self, subscription_id: int) -> None:
        self.calls.append(("stop_recording_subscription", subscription_id))
        recording_id = subscription_id % 100
        info = self.aeron.counters_reader.counters.pop(100 + recording_id, None)
        if info is not None:
            self.recordings[recording_id]["stop_position"] = info.value

    def get_stop_position(self, recording_id: int) -> int:
        return self.recordings[recording_id]["stop_position"]

    def list_recording(self, recording_id: int, consumer) -> int:
        recording = self.recordings.get(recording_id)
        if recording is None:
            return 0
        stop = recording["stop_position"]
        consumer(type("Descriptor", (), dict(start_position=recording["start_position"],
                                             stop_position=stop if stop >= 0 else 0, initial_term_id=0,
                                             term_buffer_length=64 * 1024, mtu_length=1408,
                                             session_id=recording["session_id"])))
        return 1

    def poll_for_error_response(self):
        return self.errors.pop(0) if self.errors else None

    def poll_for_recording_signals(self, consumer) -> int:
        count = len(self.signals)
        for signal in self.signals:
            if consumer is not None:
                consumer(signal)
        self.signals.clear()
        return count

    def close(self) -> None:
        self.calls.append(("close",))


class FakeMarkFile:
    def __init__(self):
        self.activity_timestamps: list[int] = []

    def update_activity_timestamp(self, now_ms: int) -> None:
        self.activity_timestamps.append(now_ms)


class Clock:
    def __init__(self, now_ns: int = 1_700_000_000_000_000_000):
        self.now_ns = now_ns

    def __call__(self) -> int:
        return self.now_ns

    def advance_ms(self, ms: int) -> None:
        self.now_ns += ms * 1_000_000


class StepIdle:
    """An idle strategy that moves the fake clock on and lets a test act each time the agent waits."""

    def __init__(self, clock: Clock, on_idle=None):
        self.clock = clock
        self.on_idle = on_idle
        self.idles = 0

    def idle(self, work_count: int = 0) -> None:
        self.idles += 1
        if self.idles > 10_000:
            raise AssertionError("the agent waited 10000 times: a wait that never ends")
        self.clock.advance_ms(1)
        if self.on_idle is not None:
            self.on_idle()

    def reset(self) -> None:
        pass


class FakeService:
    """Service 0 as the consensus module sees it: acks the start (its client id) and every JoinLog it is sent."""

    def __init__(self, aeron: FakeAeron, service_id: int = 0):
        self.aeron = aeron
        self.service_id = service_id
        self.ack_id = 0
        self.acked_start = False
        self.joins: list = []

    def __call__(self) -> None:
        to_cm = [s for s in self.aeron.subscriptions if s.stream_id == 105]
        if not to_cm:
            return
        if not self.acked_start:
            self.acked_start = True
            self.ack(0, relevant_id=2000 + self.service_id)
        to_service = [p for p in self.aeron.publications if p.stream_id == 104]
        for join in (to_service[0].of("JoinLog") if to_service else [])[len(self.joins):]:
            self.joins.append(join)
            self.ack(join.log_position)

    def ack(self, log_position: int, relevant_id: int = -1) -> None:
        to_cm = [s for s in self.aeron.subscriptions if s.stream_id == 105][0]
        to_cm.feed(CLUSTER.ServiceAck(log_position=log_position, timestamp=0, ack_id=self.ack_id,
                                      relevant_id=relevant_id, service_id=self.service_id))
        self.ack_id += 1


def member_endpoints(member_id: int) -> str:
    base = 20000 + member_id * 10
    return ",".join(f"127.0.0.{member_id + 1}:{base + i}" for i in range(5))


def context(tmp_path, member_count: int = 1, member_id: int = 0, **overrides) -> ConsensusModuleContext:
    members = "|".join(f"{i},{member_endpoints(i)}" for i in range(member_count))
    settings = dict(cluster_dir=str(tmp_path / "cluster"), cluster_members=members, cluster_member_id=member_id,
                    ingress_channel="aeron:udp?term-length=64k", log_channel="aeron:udp?term-length=64k",
                    replication_channel="aeron:udp?endpoint=127.0.0.1:0", session_timeout_ns=5_000_000_000)
    settings.update(overrides)
    ctx = ConsensusModuleContext.from_env({}, **settings).conclude()
    (tmp_path / "cluster").mkdir(exist_ok=True)
    return ctx


@dataclass
class World:
    ctx: ConsensusModuleContext
    aeron: FakeAeron
    archive: FakeArchive
    counters: FakeCounters
    clock: Clock
    idle: StepIdle
    service: FakeService | None
    errors: list = field(default_factory=list)
    agent: object = None


def make_agent(tmp_path, member_count: int = 1, member_id: int = 0, service_count: int = 1, clock=None,
               **overrides) -> World:
    from aeron_numba.cluster.consensus_module_agent import ConsensusModuleAgent
    from aeron_numba.cluster.node_state_file import NodeStateFile
    from aeron_numba.cluster.recording_log import RecordingLog

    ctx = context(tmp_path, member_count, member_id, service_count=service_count, **overrides)
    aeron = FakeAeron()
    archive = FakeArchive(aeron)
    counters = FakeCounters()
    clock = clock or Clock()
    service = FakeService(aeron) if service_count else None
    idle = StepIdle(clock, service)
    errors: list = []

    def on_error(error):
        errors.append(error)
        counters.errors.increment()

    agent = ConsensusModuleAgent(
        ctx, aeron, archive_connect=lambda: archive,
        recording_log=RecordingLog(ctx.cluster_dir, create_new=True),
        node_state_file=NodeStateFile.open(ctx.cluster_dir, create_new=True), mark_file=FakeMarkFile(),
        counters=counters, cluster_clock=ClusterClock(ClusterTimeUnit.MILLIS, clock), idle_strategy=idle,
        error_handler=on_error, random=__import__("random").Random(member_id + 1))
    return World(ctx, aeron, archive, counters, clock, idle, service, errors, agent)
