"""The driver's side of an ``aeron:ipc`` publication (spec/transport.md §4.7, §15).

One ``IpcPublication`` per log: concurrent publications of a stream share it (reference counted),
each exclusive publication has its own. The driver moves ``pub-lmt`` from the slowest subscriber,
publishes ``pub-pos``, zeroes consumed term space, detects and unblocks a publisher that died mid-claim,
and runs the lifecycle ACTIVE -> DRAINING -> LINGER -> DONE on its timer. Untethered subscribers
(``tether=false``) that fall too far behind are dropped, rest, and rejoin at the consumer position (§15.2).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from aeron_numba.kernels import atomics_for_python, counters as counters_kernels
from aeron_numba.kernels.counters import counter_value_address
from aeron_numba.kernels.idle_wait import first_changed_word, snapshot_words
from aeron_numba.kernels.log_buffer_unblocker import unblock
from aeron_numba.kernels.log_cleaner import clean_buffer_to
from aeron_numba.kernels.term_appender import producer_position
from aeron_numba.layout import log_buffer_descriptor as lb
from aeron_numba.layout.counters import UNBLOCKED_PUBLICATIONS
from aeron_numba.layout.log_buffers import LogBuffers


class State(enum.Enum):
    ACTIVE = 1
    DRAINING = 2
    LINGER = 3
    DONE = 4


class TetherState(enum.Enum):
    """§15.2: a tethered subscriber is always ACTIVE; an untethered one may be dropped (LINGER), then RESTING."""

    ACTIVE = 1
    LINGER = 2
    RESTING = 3


class ImageChange(enum.Enum):
    """What the conductor tells an untethered subscriber's client after a tether state change."""

    UNAVAILABLE = 1
    AVAILABLE = 2


@dataclass
class SubscriberPosition:
    """One subscription's ``sub-pos`` counter on this publication's image."""

    subscription: object  # driver_conductor.SubscriptionLink (tether, untethered timeouts)
    counter_id: int
    join_position: int
    tether_state: TetherState = TetherState.ACTIVE
    time_of_last_update_ns: int = 0

    @property
    def tethered(self) -> bool:
        return self.subscription.tether

    @property
    def counts_for_flow_control(self) -> bool:
        return self.tether_state is not TetherState.RESTING


class UpdateInputs:
    """The words a publication's conductor-cycle update reads (its tail counters, its subscribers' positions, ...;
    ``words()`` lists their addresses, built by ``build`` and kept until ``invalidate``) and their values when the
    update last ran. While none has moved, running the update again would change nothing, so it is skipped: one
    compiled look instead of the update's Python on every conductor cycle. The owner calls ``invalidate`` whenever
    something else the update depends on changes (a subscriber comes or goes, a tether state, a connection). The
    same list serves the publication's idle watch (``IdleWatch.watch_words``)."""

    #: Moved by every publication's ``invalidate``: one look tells a watch named from several publications' inputs
    #: whether any of them may have changed (``NetworkCycles.add_idle_watch``).
    invalidations = 0

    def __init__(self, build):
        self._build = build
        self.version = 0  # moved by every ``invalidate``: what was computed from the inputs may be stale
        self._words: list[int] | None = None
        self.addresses = self.values = np.zeros(0, np.int64)
        self._snapshot_taken = False

    def invalidate(self) -> None:
        self.version += 1
        UpdateInputs.invalidations += 1
        self._words = None
        self._snapshot_taken = False

    def words(self) -> list[int]:
        if self._words is None:
            self._words = self._build()
            self.addresses = np.array(self._words, np.int64)
            self.values = np.zeros(len(self._words), np.int64)
        return self._words

    def unchanged(self) -> bool:
        return self._snapshot_taken and first_changed_word(self.addresses, self.values) < 0

    def snapshot(self) -> None:
        """Before the update reads them: a word that moves after this runs the update again next cycle."""
        self.words()
        snapshot_words(self.addresses, self.values)
        self._snapshot_taken = True


def tail_counter_addresses(log: LogBuffers) -> list[int]:
    """Addresses of a log's tail counters: every claim and every term rotation moves one."""
    base = log.buffer.ctypes.data + log.metadata_offset
    return [base + lb.term_tail_counter_offset(partition) for partition in range(lb.PARTITION_COUNT)]


@dataclass
class IpcPublication:
    registration_id: int
    session_id: int
    stream_id: int
    channel: str
    exclusive: bool
    log: LogBuffers
    pub_pos_counter_id: int
    pub_lmt_counter_id: int
    term_window_length: int
    unblock_timeout_ns: int
    values_buffer: np.ndarray
    now_ns: int
    ref_count: int = 1
    state: State = State.ACTIVE
    subscribers: list[SubscriberPosition] = field(default_factory=list)
    trip_limit: int = 0
    consumer_position: int = 0
    clean_position: int = 0
    last_consumer_position: int = 0
    time_of_last_consumer_position_change_ns: int = 0
    owners: list[int] = field(default_factory=list)  # client ids holding a reference, one per add

    def __post_init__(self) -> None:
        position = self.producer_position()
        self.start_position = position  # where the log began: a concurrent publication joining must match it
        self.consumer_position = self.clean_position = self.last_consumer_position = position
        self.time_of_last_consumer_position_change_ns = self.now_ns
        self.update_inputs = UpdateInputs(lambda: tail_counter_addresses(self.log) + [
            counter_value_address(self.values_buffer, s.counter_id) for s in self.subscribers])
        self._set_counter(self.pub_lmt_counter_id, position)
        self._set_counter(self.pub_pos_counter_id, position)

    # ------------------------------------------------------------------------------------------- helpers
    def _set_counter(self, counter_id: int, value: int) -> None:
        counters_kernels.set_counter_value(self.values_buffer, counter_id, value)

    def _get_counter(self, counter_id: int) -> int:
        return int(counters_kernels.get_counter_value(self.values_buffer, counter_id))

    def producer_position(self) -> int:
        return int(producer_position(self.log.buffer))

    @property
    def log_file_name(self) -> str:
        return str(self.log.path)

    def _set_metadata_i32(self, offset: int, value: int) -> None:
        atomics_for_python.put_int32_release(self.log.buffer, self.log.metadata_offset + offset, value)

    # ---------------------------------------------------------------------------------- subscriber links
    def add_subscriber(self, subscription, counter_id: int, join_position: int, now_ns: int = 0) -> None:
        self.subscribers.append(SubscriberPosition(subscription, counter_id, join_position,
                                                   time_of_last_update_ns=now_ns))
        self.update_inputs.invalidate()
        self._set_counter(counter_id, join_position)
        if len(self.subscribers) == 1:
            self._set_metadata_i32(lb.LOG_IS_CONNECTED_OFFSET, 1)
        self._set_metadata_i32(lb.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET, len(self.subscribers))

    def remove_subscriber(self, subscription) -> SubscriberPosition | None:
        # As Aeron: take the leaving subscriber's position into the consumer position first, or a subscriber that
        # joins next (at the consumer position, when no other is left) reads again what this one had read.
        self.update_pub_pos_and_pub_lmt()
        for index, subscriber in enumerate(self.subscribers):
            if subscriber.subscription is subscription:
                del self.subscribers[index]
                self.update_inputs.invalidate()
                if not self.subscribers:
                    self._set_metadata_i32(lb.LOG_IS_CONNECTED_OFFSET, 0)
                self._set_metadata_i32(lb.LOG_ACTIVE_TRANSPORT_COUNT_OFFSET, len(self.subscribers))
                return subscriber
        return None

    def subscriber_positions(self) -> list[int]:
        """Positions of the subscribers that hold the publisher back (every one but the RESTING)."""
        return [self._get_counter(s.counter_id) for s in self.subscribers if s.counts_for_flow_control]

    def is_drained(self) -> bool:
        producer = self.producer_position()
        return all(position >= producer for position in self.subscriber_positions())

    def is_accepting_subscriptions(self) -> bool:
        """ACTIVE, or closed but with data a subscriber has still to read (Aeron's rule): a subscriber that comes
        while an archive replay's publication drains (the replay sent everything and closed, the consensus module
        has not read it yet) gets the image too, at the join position."""
        return self.state is State.ACTIVE or (self.state is State.DRAINING and not self.is_drained())

    def join_position(self) -> int:
        """Where a new subscriber starts (Aeron's ``joinPosition``): the slowest subscriber that still holds the
        publisher back, or the consumer position. Not the producer position: a subscriber that arrives while
        another is still reading (a cluster service joining a log replay after the consensus module subscribed)
        must see the same data from the same place, or it joins mid-stream."""
        return min([self.consumer_position, *self.subscriber_positions()])

    def check_untethered_subscriptions(self, now_ns: int) -> list[tuple[SubscriberPosition, ImageChange]]:
        """§15.2 on each timer tick while ACTIVE, against the consumer position (see ``check_untethered``)."""
        if not all(subscriber.tethered for subscriber in self.subscribers):
            self.update_inputs.invalidate()  # a tether state may change, and with it who holds the limit back
        return check_untethered(self.subscribers, self.consumer_position, self.term_window_length, now_ns,
                                self.values_buffer)

    # ---------------------------------------------------------------------------------------- duty cycle
    def update_pub_pos_and_pub_lmt(self) -> int:
        """Every conductor cycle while ACTIVE: publish ``pub-pos``; move ``pub-lmt`` and clean (§4.7)."""
        if self.state is not State.ACTIVE:
            return 0
        inputs = self.update_inputs
        if inputs.unchanged():
            return 0
        inputs.snapshot()
        producer = self.producer_position()
        self._set_counter(self.pub_pos_counter_id, producer)
        work = 0
        positions = self.subscriber_positions()
        if positions:
            min_position, max_position = min(positions), max(positions)
            self.consumer_position = max(self.consumer_position, max_position)
            proposed = min_position + self.term_window_length
            if proposed > self.trip_limit:
                self._set_counter(self.pub_lmt_counter_id, proposed)
                self.trip_limit = proposed + self.term_window_length // 8
                work = 1
            self.clean_position = int(clean_buffer_to(self.log.buffer, self.clean_position, min_position))
        elif self._get_counter(self.pub_lmt_counter_id) > self.consumer_position:
            # No subscriber (or only resting ones): hold the publisher at the consumer position (NOT_CONNECTED / back pressure).
            self._set_counter(self.pub_lmt_counter_id, self.consumer_position)
            self.trip_limit = self.consumer_position
            work = 1
        return work

    def add_idle_watch(self, watch) -> None:
        """What ``update_pub_pos_and_pub_lmt`` reads: the tail counters (a publisher claims, a term rotates) and
        every subscriber's ``sub-pos`` (``agent/idle_watch.py``)."""
        watch.watch_words((self.log.buffer, self.values_buffer), self.update_inputs.words())

    def on_time_event(self, now_ns: int, system_counters) -> bool:
        """Timer tick: blocked-publisher check and the lifecycle. Returns True when the publication is DONE."""
        if self.state is State.ACTIVE:
            if not self.exclusive:
                self._check_for_blocked_publisher(now_ns, self.producer_position(), system_counters)
        elif self.state is State.DRAINING:
            producer = self.producer_position()
            self._set_counter(self.pub_pos_counter_id, producer)
            if self.is_drained():
                self.state = State.LINGER
            else:
                self._check_for_blocked_publisher(now_ns, producer, system_counters)
        elif self.state is State.LINGER:
            self.state = State.DONE
        return self.state is State.DONE

    def _check_for_blocked_publisher(self, now_ns: int, producer: int, system_counters) -> None:
        """§15.1: the consumer position has not moved for the unblock timeout while data is pending."""
        positions = self.subscriber_positions()
        consumer = max(positions) if positions else self.consumer_position
        if consumer != self.last_consumer_position:
            self.last_consumer_position = consumer
            self.time_of_last_consumer_position_change_ns = now_ns
            return
        active_term_count = int(
            atomics_for_python.get_int32_acquire(self.log.buffer, self.log.metadata_offset + lb.LOG_ACTIVE_TERM_COUNT_OFFSET)
        )
        possibly_blocked = (
            active_term_count != consumer >> self.log.position_bits_to_shift or producer > consumer
        )
        if possibly_blocked and now_ns > self.time_of_last_consumer_position_change_ns + self.unblock_timeout_ns:
            if unblock(self.log.buffer, consumer):
                system_counters.increment(UNBLOCKED_PUBLICATIONS)
            self.time_of_last_consumer_position_change_ns = now_ns

    def close_by_clients(self) -> None:
        """Reference count reached 0: pull the limit back, mark end of stream, start DRAINING (§15)."""
        producer = self.producer_position()
        if self._get_counter(self.pub_lmt_counter_id) > producer:
            self._set_counter(self.pub_lmt_counter_id, producer)
        atomics_for_python.put_int64_release(
            self.log.buffer, self.log.metadata_offset + lb.LOG_END_OF_STREAM_POSITION_OFFSET, producer
        )
        self.state = State.DRAINING


def check_untethered(subscribers: list[SubscriberPosition], reference_position: int, window: int, now_ns: int,
                     values_buffer: np.ndarray) -> list[tuple[SubscriberPosition, ImageChange]]:
    """§15.2 for the subscribers of one log (an IPC publication's, or a network publication's spies, where the
    reference is the sender position); returns the image changes the clients must be told about.

    An untethered subscriber at or below ``reference - window + window/4`` (about to block the publisher)
    for the window limit timeout is dropped (LINGER: it still holds the limit while its client lets go of
    the image), after another window limit timeout it RESTS (ignored by flow control, its data may be
    overwritten), and after the resting timeout it rejoins at the reference position.
    """
    changes = []
    window_limit = reference_position - window + window // 4
    for subscriber in subscribers:
        if subscriber.tethered:
            continue
        link = subscriber.subscription
        since_update_ns = now_ns - subscriber.time_of_last_update_ns
        if subscriber.tether_state is TetherState.ACTIVE:
            if int(counters_kernels.get_counter_value(values_buffer, subscriber.counter_id)) > window_limit:
                subscriber.time_of_last_update_ns = now_ns
            elif since_update_ns > link.untethered_window_limit_timeout_ns:
                subscriber.tether_state, subscriber.time_of_last_update_ns = TetherState.LINGER, now_ns
                changes.append((subscriber, ImageChange.UNAVAILABLE))
        elif subscriber.tether_state is TetherState.LINGER:
            if since_update_ns > link.untethered_window_limit_timeout_ns:
                subscriber.tether_state, subscriber.time_of_last_update_ns = TetherState.RESTING, now_ns
        elif since_update_ns > link.untethered_resting_timeout_ns:
            subscriber.join_position = reference_position
            counters_kernels.set_counter_value(values_buffer, subscriber.counter_id, reference_position)
            subscriber.tether_state, subscriber.time_of_last_update_ns = TetherState.ACTIVE, now_ns
            changes.append((subscriber, ImageChange.AVAILABLE))
    return changes
