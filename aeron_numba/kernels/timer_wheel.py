"""Kernels of a deadline timer wheel with the semantics of Agrona's ``DeadlineTimerWheel`` (the wheel under
Aeron Cluster's default ``WheelTimerService``).

The wheel is two int64 arrays: ``wheel``, ``ticks_per_wheel`` spokes of ``tick_allocation`` slots each, a slot holding
a deadline or ``NULL_DEADLINE``; and ``state``, the scalars below. A timer id is ``(spoke << 32) | slot``. A deadline
goes to spoke ``max((deadline - start_time) >> resolution_shift, current_tick) & tick_mask``, so a deadline more
than a wheel's turn ahead shares a spoke with nearer ones and is simply passed over until ``now`` reaches it.

The kernels never call back into Python: ``poll_expired`` collects the expired timers of one poll into caller-owned
arrays, and the caller hands them to its handler (and puts back those the handler refused, ``restore_expired``).
That keeps them callable from a compiled consensus module later, which appends a TimerEvent per expiry itself.
When a spoke is full ``schedule_timer`` returns ``NO_TIMER`` and the caller grows the wheel (an allocation).
"""

import numpy as np

from aeron_numba.jit import kernel

NULL_DEADLINE = np.iinfo(np.int64).max
NO_TIMER = -1

# Indices into the state array.
START_TIME = 0
CURRENT_TICK = 1
TIMER_COUNT = 2
POLL_INDEX = 3
TICK_ALLOCATION = 4
ALLOCATION_SHIFT = 5
RESOLUTION_SHIFT = 6
TICK_MASK = 7
STATE_LENGTH = 8


@kernel(inline="always")
def timer_id_for_slot(spoke, slot):
    return (np.int64(spoke) << 32) | np.int64(slot)


@kernel(inline="always")
def _wheel_index(state, timer_id):
    """Index in ``wheel`` of ``timer_id``, or -1 when the id names no slot of this wheel."""
    spoke = timer_id >> 32
    slot = timer_id & 0xFFFFFFFF
    if timer_id < 0 or spoke > state[TICK_MASK] or slot >= state[TICK_ALLOCATION]:
        return -1
    return (spoke << state[ALLOCATION_SHIFT]) + slot


@kernel
def current_tick_time(state):
    """Time at which the current tick ends (polls before it cannot move the wheel on)."""
    return ((state[CURRENT_TICK] + 1) << state[RESOLUTION_SHIFT]) + state[START_TIME]


@kernel
def advance_current_tick(state, now):
    """Move the current tick up to ``now``'s, never back (Agrona's ``currentTickTime(now)``)."""
    tick = (now - state[START_TIME]) >> state[RESOLUTION_SHIFT]
    if tick > state[CURRENT_TICK]:
        state[CURRENT_TICK] = tick


@kernel
def schedule_timer(state, wheel, deadline):
    """Put ``deadline`` in the first free slot of its spoke; its timer id, or ``NO_TIMER`` if the spoke is full.

    Parameters
    ----------
    state, wheel : int64 arrays of the wheel.
    deadline : int64 in the wheel's time unit; a deadline already past lands on the current tick.
    """
    tick = (deadline - state[START_TIME]) >> state[RESOLUTION_SHIFT]
    if tick < state[CURRENT_TICK]:
        tick = state[CURRENT_TICK]
    spoke = tick & state[TICK_MASK]
    start = spoke << state[ALLOCATION_SHIFT]
    for slot in range(state[TICK_ALLOCATION]):
        if wheel[start + slot] == NULL_DEADLINE:
            wheel[start + slot] = deadline
            state[TIMER_COUNT] += 1
            return timer_id_for_slot(spoke, slot)
    return NO_TIMER


@kernel
def cancel_timer(state, wheel, timer_id):
    """Free the slot of ``timer_id``; False when it holds no timer (already expired, cancelled or never made)."""
    index = _wheel_index(state, timer_id)
    if index < 0 or wheel[index] == NULL_DEADLINE:
        return False
    wheel[index] = NULL_DEADLINE
    state[TIMER_COUNT] -= 1
    return True


@kernel
def deadline_of(state, wheel, timer_id):
    """Deadline of ``timer_id``, or ``NULL_DEADLINE`` when it holds no timer."""
    index = _wheel_index(state, timer_id)
    if index < 0:
        return NULL_DEADLINE
    return wheel[index]


@kernel
def poll_expired(state, wheel, now, expiry_limit, expired_ids, expired_deadlines):
    """One poll of the current tick: free up to ``expiry_limit`` timers whose deadline is <= ``now``, scanning the
    tick's slots from the poll index, write their ids and deadlines to the output arrays (length >= the limit) and
    return how many. Moves to the next tick when the limit was not reached and ``now`` is past the current tick's
    end; a limited poll keeps its place in the tick, so the next poll carries on from there.
    """
    expired = 0
    allocation = state[TICK_ALLOCATION]
    if state[TIMER_COUNT] > 0:
        spoke = state[CURRENT_TICK] & state[TICK_MASK]
        start = spoke << state[ALLOCATION_SHIFT]
        i = 0
        while i < allocation and expired < expiry_limit:
            slot = state[POLL_INDEX]
            deadline = wheel[start + slot]
            if now >= deadline:
                wheel[start + slot] = NULL_DEADLINE
                state[TIMER_COUNT] -= 1
                expired_ids[expired] = timer_id_for_slot(spoke, slot)
                expired_deadlines[expired] = deadline
                expired += 1
            state[POLL_INDEX] = 0 if slot + 1 >= allocation else slot + 1
            i += 1
        if expired < expiry_limit and now >= current_tick_time(state):
            state[CURRENT_TICK] += 1
            state[POLL_INDEX] = 0
        elif state[POLL_INDEX] >= allocation:
            state[POLL_INDEX] = 0
    elif now >= current_tick_time(state):
        state[CURRENT_TICK] += 1
        state[POLL_INDEX] = 0
    return expired


@kernel
def restore_expired(state, wheel, current_tick, expired_ids, expired_deadlines, first, count):
    """Undo the expiry of timers ``first``..``count``-1 of a ``poll_expired`` whose handler refused timer ``first``:
    their deadlines go back in their slots, and the wheel stays on ``current_tick`` (its tick before the poll) with
    the refused timer next to poll, as Agrona's wheel does when its handler returns false mid-poll."""
    for k in range(first, count):
        timer_id = expired_ids[k]
        wheel[((timer_id >> 32) << state[ALLOCATION_SHIFT]) + (timer_id & 0xFFFFFFFF)] = expired_deadlines[k]
        state[TIMER_COUNT] += 1
    state[CURRENT_TICK] = current_tick
    state[POLL_INDEX] = expired_ids[first] & 0xFFFFFFFF


@kernel
def next_timer(wheel, from_index):
    """Index of the first slot at or after ``from_index`` holding a timer, or -1 (for iterating the timers)."""
    for index in range(from_index, wheel.shape[0]):
        if wheel[index] != NULL_DEADLINE:
            return index
    return -1
