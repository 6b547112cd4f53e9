"""Many sender and receiver duty cycles in one compiled call, for as long as nothing needs Python.

A Python duty cycle of the driver costs tens of microseconds, which is the whole budget of a UDP round trip.
``run_network_cycles`` repeats the per-datagram work of both agents back to back: every fast publication sends
what its window allows (``publication_sender.send_data``), every fast receive socket is read and its data
inserted (``image_receiver.dispatch_batch``), every image with ``IMAGE_COMPILED_WORK`` detects loss and sends its
status messages (``image_receiver.receiver_work``). It returns to Python as soon as Python has something to do, and
says why in ``result[RESULT_REASON]``:

* ``RETURN_SLOW_DATAGRAMS``: a receive batch holds datagrams only Python handles (SETUP, RTTM, an unknown
  session); they wait in the batch, ``result[RESULT_INDEX]`` names the socket, ``result[RESULT_COUNT]`` the
  batch size, ``slow`` the indices (``dispatch_batch``'s list);
* ``RETURN_CONTROL_FRAMES``: control frames only Python handles (a new receiver's status message, NAKs, RTT)
  came back to a send socket; they wait in the control batch (``result[RESULT_INDEX]`` names the socket, ``slow``
  their indices), the status messages of known receivers already taken (``publication_sender``);
* ``RETURN_NAK_DUE``: an image's loss detector wants a NAK sent (Python reports the loss and sends it);
  ``result[RESULT_INDEX]`` names the image;
* ``RETURN_WATCH``: a watched word changed (the conductor's command queue, in SHARED mode);
* ``RETURN_BUDGET``: ``budget_ns`` passed: the agents' per-image and timer work (status messages, loss
  detection, heartbeats) runs in Python that often;
* ``RETURN_IDLE``: nothing came for ``idle_ns`` (the runner's idle strategy takes over from there), or at once
  when ``idle_ns`` is 0;
* ``RETURN_ERROR``: a socket failed; ``result[RESULT_INDEX]`` = ``-errno``.

After each pass's receiving it runs the ``stages`` (``network_stages``): other agents' compiled work on what the
pass received (a member's archive recording its log), whose offers the next pass sends.

While it waits for work it calls ``sched_yield`` every ``yield_mask + 1`` empty passes: on a machine with fewer
cores than busy threads, the peers it waits for need the core.
"""

from __future__ import annotations

from aeron_numba.jit import kernel
from aeron_numba.kernels import counters as ck
from aeron_numba.kernels.idle_wait import first_changed_word, monotonic_ns, yield_cpu
from aeron_numba.kernels.image_receiver import NAK_DUE, SLOW_COUNT, WORK_DONE, WORK_FLAGS, dispatch_batch, receiver_work
from aeron_numba.kernels.memory import bytes_at, int64s_at
from aeron_numba.kernels.network_stages import run_stages
from aeron_numba.kernels.publication_sender import (TABLE_CONTROL, TABLE_DESTINATIONS, TABLE_FD, TABLE_ROW,
                                                     TABLE_SOCKADDR, send_data, take_status_messages)
from aeron_numba.kernels.udp_socket import receive_datagrams
from aeron_numba.layout import network_state as ns

RESULT_WORK, RESULT_REASON, RESULT_INDEX, RESULT_COUNT = 0, 1, 2, 3
RESULT_LENGTH = 4
RETURN_SLOW_DATAGRAMS, RETURN_CONTROL_FRAMES, RETURN_WATCH, RETURN_BUDGET, RETURN_IDLE, RETURN_ERROR = 1, 2, 3, 4, 5, 6
RETURN_NAK_DUE = 7

#: Columns of the socket tables (receive sockets and the sender's control sockets): the socket, its endpoint's id
#: (receive sockets), its bound port, its loss generator (state and gap bitmap, by address) and the address of the
#: word holding when it last returned a datagram.
(SOCKET_FD, SOCKET_ENDPOINT_ID, SOCKET_LOCAL_PORT, SOCKET_LOSS_STATE, SOCKET_GAP_DROPPED, SOCKET_GAP_LENGTH,
 SOCKET_LAST_DATAGRAM) = range(7)
SOCKET_COLUMNS = 7
#: A socket quiet for this long (a stream that ended, a lingering endpoint) is read only every
#: ``QUIET_SOCKET_POLL_MASK + 1`` passes: each read is a system call, and every pass pays for every socket.
QUIET_SOCKET_NS = 1_000_000
QUIET_SOCKET_POLL_MASK = 7


#: The words of an image's row that ``NetworkCycles``' own watch is named from (``scan_watched_rows``).
_IMAGE_WATCHED_COLUMNS = (ns.IMAGE_IS_ACTIVE, ns.IMAGE_COMPILED_WORK, ns.IMAGE_LAST_SM_POSITION,
                          ns.IMAGE_RECEIVER_WINDOW, ns.IMAGE_END_OF_STREAM_POSITION, ns.IMAGE_SUBSCRIBER_IDS_ADDRESS,
                          ns.IMAGE_SUBSCRIBER_COUNT)
#: What ``scan_watched_rows`` keeps: the two counts, then per publication its row's address, per image its row's
#: address and those words.
KEPT_HEADER = 2
KEPT_PER_PUBLICATION = 1
KEPT_PER_IMAGE = 1 + len(_IMAGE_WATCHED_COLUMNS)


def kept_rows_length(publication_count: int, image_count: int) -> int:
    return KEPT_HEADER + KEPT_PER_PUBLICATION * publication_count + KEPT_PER_IMAGE * image_count


@kernel(inline="always")
def _keep(kept, k, value):
    same = kept[k] == value
    kept[k] = value
    return same


@kernel
def _a_subscriber_reached(row, values):
    """Whether a subscriber of image ``row`` is at the point where its next status message is due (a quarter
    window past the last one, or the end of the stream): the one its watch names may be it."""
    last = row[ns.IMAGE_LAST_SM_POSITION]
    due_at = last + row[ns.IMAGE_RECEIVER_WINDOW] // 4
    end = row[ns.IMAGE_END_OF_STREAM_POSITION]
    if end != ns.NO_POSITION and end > last:
        due_at = min(due_at, end)
    count = row[ns.IMAGE_SUBSCRIBER_COUNT]
    if count == 0:
        return False
    ids = int64s_at(row[ns.IMAGE_SUBSCRIBER_IDS_ADDRESS], count)
    for i in range(count):
        if ck.get_counter_value(values, ids[i]) >= due_at:
            return True
    return False


@kernel
def image_deadline(row, now_ns, soonest_ns):
    """When image ``row``'s receiver work must run by: its next status message, or now while it has a gap (its
    loss checks); not sooner than ``now_ns + soonest_ns``. -1 when it is not active (only an active image sends
    status messages and NAKs)."""
    if row[ns.IMAGE_IS_ACTIVE] == 0:
        return -1
    due = row[ns.IMAGE_TIME_OF_LAST_SM_NS] + row[ns.IMAGE_STATUS_MESSAGE_TIMEOUT_NS]
    if row[ns.IMAGE_REBUILD_POSITION] < row[ns.IMAGE_HWM_POSITION]:
        due = now_ns
    return max(due, now_ns + soonest_ns)


@kernel
def scan_watched_rows(publications, publication_count, image_rows, image_count, values, now_ns, soonest_ns, kept,
                      deadline):
    """For the network cycles' own watch (``NetworkCycles.add_idle_watch``): whether every word it is named from
    (the publication rows, whose frame at the sender position it names by the position's word; an image's state,
    last status message, window, end of stream and subscribers, which point its slowest subscriber is watched for
    reaching) holds what it held at the last call, for the same rows, and no subscriber has reached that point (the
    one watched would be named anew); ``kept`` (``kept_rows_length`` long) then holds them for the next.
    ``deadline[0]``: when the images whose work the cycles do must run by (the next status message, now while there
    is a gap; not sooner than ``now_ns + soonest_ns``), or -1 when none has a timer."""
    deadline[0] = -1
    same = _keep(kept, 0, publication_count)
    if not _keep(kept, 1, image_count):
        same = False
    k = KEPT_HEADER
    for i in range(publication_count):
        address = publications[i, TABLE_ROW]
        if not _keep(kept, k, address):
            same = False
        k += KEPT_PER_PUBLICATION
    for i in range(image_count):
        row = int64s_at(image_rows[i], ns.IMAGE_ROW_LENGTH)
        if not _keep(kept, k, image_rows[i]):
            same = False
        for j in range(len(_IMAGE_WATCHED_COLUMNS)):
            if not _keep(kept, k + 1 + j, row[_IMAGE_WATCHED_COLUMNS[j]]):
                same = False
        if row[ns.IMAGE_COMPILED_WORK] != 0:
            if same and _a_subscriber_reached(row, values):
                same = False
            due = image_deadline(row, now_ns, soonest_ns)
            if due >= 0 and (deadline[0] < 0 or due < deadline[0]):
                deadline[0] = due
        k += KEPT_PER_IMAGE
    return same


@kernel
def _finish(result, work, reason, index, count):
    result[RESULT_WORK], result[RESULT_REASON], result[RESULT_INDEX], result[RESULT_COUNT] = work, reason, index, count


@kernel
def _read_socket(sockets, index, msgs, vlen, now, passes):
    """Read socket ``index`` of a socket table into a batch: every pass while it is busy, every few passes once
    quiet. Returns the datagrams read (0 when none, or when it was not read this pass) or ``-errno``."""
    last_datagram = int64s_at(sockets[index, SOCKET_LAST_DATAGRAM], 1)
    if now - last_datagram[0] >= QUIET_SOCKET_NS and (passes & QUIET_SOCKET_POLL_MASK) != 0:
        return 0
    count = receive_datagrams(sockets[index, SOCKET_FD], msgs, vlen)
    if count > 0:
        last_datagram[0] = now
    return count


@kernel
def run_network_cycles(publications, publication_count, receive_sockets, receive_count, control_sockets, control_count,
                       image_rows, image_count, batch_msgs, batch_names, batch_buffer, slot_length, batch_vlen,
                       control_msgs, control_names, control_buffer, control_vlen, send_msgs, send_iovecs, send_vlen, watch_addresses, watch_values, values,
                       budget_ns, idle_ns, yield_mask, slow, collect_result, scratch, work_result, stages, stage_count,
                       result):
    """Run sender and receiver cycles until Python is needed (see the module docstring); ``result`` gets the work
    done (datagrams sent and received, and the stages' work), why it returned and where."""
    start = monotonic_ns()
    last_work = start
    work = 0
    empty_passes = 0
    # The first pass is pass 0, which reads every socket, quiet or not (so does the last: see going idle below).
    passes = -1
    while True:
        now = monotonic_ns()
        passes += 1
        found = 0
        for i in range(publication_count):
            row = int64s_at(publications[i, TABLE_ROW], ns.PUBLICATION_ROW_LENGTH)
            if row[ns.PUBLICATION_HAS_RECEIVERS] == 0:
                continue
            control = publications[i, TABLE_CONTROL]
            sent = send_data(row, send_msgs, send_iovecs, send_vlen, publications[i, TABLE_FD],
                             publications[i, TABLE_SOCKADDR], publications[i, TABLE_DESTINATIONS], now, values,
                             control_sockets[control, SOCKET_LOSS_STATE], control_sockets[control, SOCKET_LOCAL_PORT],
                             collect_result)
            if sent < 0:
                _finish(result, work + found, RETURN_ERROR, sent, 0)
                return
            if sent > 0:
                found += collect_result[0]
        for i in range(receive_count):
            count = _read_socket(receive_sockets, i, batch_msgs, batch_vlen, now, passes)
            if count < 0:
                _finish(result, work + found, RETURN_ERROR, count, 0)
                return
            if count == 0:
                continue
            found += count
            dispatch_batch(batch_msgs, batch_names, batch_buffer, slot_length, count,
                           receive_sockets[i, SOCKET_ENDPOINT_ID], receive_sockets[i, SOCKET_FD], image_rows,
                           image_count, values, now,
                           int64s_at(receive_sockets[i, SOCKET_LOSS_STATE], ns.LOSS_STATE_LENGTH),
                           bytes_at(receive_sockets[i, SOCKET_GAP_DROPPED], receive_sockets[i, SOCKET_GAP_LENGTH]),
                           receive_sockets[i, SOCKET_LOCAL_PORT], slow)
            if slow[SLOW_COUNT] > 0:
                _finish(result, work + found, RETURN_SLOW_DATAGRAMS, i, count)
                return
        for i in range(control_count):
            count = _read_socket(control_sockets, i, control_msgs, control_vlen, now, passes)
            if count < 0:
                _finish(result, work + found, RETURN_ERROR, count, 0)
                return
            if count == 0:
                continue
            found += count
            take_status_messages(control_msgs, control_names, control_buffer, slot_length, count, publications,
                                 publication_count, i, now, values,
                                 int64s_at(control_sockets[i, SOCKET_LOSS_STATE], ns.LOSS_STATE_LENGTH),
                                 bytes_at(control_sockets[i, SOCKET_GAP_DROPPED], control_sockets[i, SOCKET_GAP_LENGTH]),
                                 control_sockets[i, SOCKET_LOCAL_PORT], slow)
            if slow[SLOW_COUNT] > 0:
                _finish(result, work + found, RETURN_CONTROL_FRAMES, i, count)
                return
        for i in range(image_count):
            row = int64s_at(image_rows[i], ns.IMAGE_ROW_LENGTH)
            if row[ns.IMAGE_COMPILED_WORK] == 0 or row[ns.IMAGE_IS_ACTIVE] == 0:
                continue
            receiver_work(row, bytes_at(row[ns.IMAGE_LOG_ADDRESS], row[ns.IMAGE_LOG_LENGTH]), values, now, scratch,
                          work_result)
            found += work_result[WORK_DONE]
            if work_result[WORK_FLAGS] & NAK_DUE:
                _finish(result, work + found, RETURN_NAK_DUE, i, 0)
                return
        if stage_count > 0:  # what this pass received is taken on before the next pass sends what they offered
            found += run_stages(stages, stage_count)
        work += found
        if watch_addresses.shape[0] > 0 and first_changed_word(watch_addresses, watch_values) >= 0:
            _finish(result, work, RETURN_WATCH, 0, 0)
            return
        if now - start >= budget_ns:
            _finish(result, work, RETURN_BUDGET, 0, 0)
            return
        if found > 0:
            last_work = now
            empty_passes = 0
        elif now - last_work >= idle_ns:
            if (passes & QUIET_SOCKET_POLL_MASK) == 0:
                _finish(result, work, RETURN_IDLE, 0, 0)
                return
            # Go idle only after a pass that read every socket: a datagram on a quiet socket (a first status
            # message, a SETUP) is taken now, not left for the next call however slowly the passes ran.
            passes |= QUIET_SOCKET_POLL_MASK
        else:
            empty_passes += 1
            if (empty_passes & yield_mask) == 0:
                yield_cpu()
