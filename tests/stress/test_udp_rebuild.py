"""UDP rebuild across processes (spec §5, §16): a sender and a receiver process joined by a lossy shared-memory
"network" (drops, duplicates, reordering, full-ring loss), NAKs and retransmits, heartbeats for tail loss, status
messages for flow control; this process subscribes to the rebuilt image while it is being rebuilt and checks
every message, byte for byte and in order (workers_udp_rebuild.py has the roles).

With ``term_rebuilder.insert`` publishing the frame length before the rest of the block, the subscriber would
read torn frames; with the loss detector NAKing the wrong range, or not re-NAKing a gap whose retransmit was
lost, the stream would stall and the deadline fail the test.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from aeron_numba.kernels.atomics_for_python import get_int64_acquire, put_int64_release
from aeron_numba.kernels.term_reader import FRAGMENT_COLUMNS, image_poll_batch
from aeron_numba.layout.log_buffers import LogBuffers
from aeron_numba.layout.mapped_file import MappedFile
from harness.awaiting import NotYet, await_condition
from harness.processes import join_all, spawned, watched
from tests.stress import workers_udp_rebuild as W

TIMEOUT_S = 60


def _log(path):
    return LogBuffers.create(path, term_length=W.TERM_LENGTH, initial_term_id=W.INITIAL_TERM_ID,
                             session_id=W.SESSION_ID, stream_id=W.STREAM_ID, mtu_length=W.MTU)


@pytest.mark.stress
def test_lossy_network_rebuilds_every_byte_in_order(shm_dir):
    W.warm_up(shm_dir)  # compile or load from cache before the clock starts
    paths = {name: shm_dir / name for name in ("pub.logbuffer", "image.logbuffer", "net.dat", "ctl.dat", "control.dat")}
    pub, image_log = _log(paths["pub.logbuffer"]), _log(paths["image.logbuffer"])
    files = [MappedFile.create(paths[n], size) for n, size in
             (("net.dat", W.NET_LENGTH), ("ctl.dat", W.CTL_LENGTH), ("control.dat", W.CONTROL_LENGTH))]
    image, control = image_log.buffer, files[2].buffer
    out = np.zeros((256, FRAGMENT_COLUMNS), np.int64)
    cstate = np.zeros(8, np.int64)
    seed = int.from_bytes(os.urandom(6), "little")
    affinity = os.sched_getaffinity(0)
    try:
        sender_args = (str(paths["pub.logbuffer"]), str(paths["net.dat"]), str(paths["ctl.dat"]),
                       str(paths["control.dat"]), seed, TIMEOUT_S)
        receiver_args = (str(paths["image.logbuffer"]), str(paths["net.dat"]), str(paths["ctl.dat"]),
                         str(paths["control.dat"]), TIMEOUT_S)
        with spawned(W.sender, [sender_args]) as senders, spawned(W.receiver, [receiver_args]) as receivers:
            procs = senders + receivers
            W.pin_to(1)  # after the spawn: the workers keep the whole mask and pin themselves to the first CPU
            deadline = time.monotonic() + TIMEOUT_S
            await_condition(lambda: get_int64_acquire(control, W.READY * 8) >= 2, TIMEOUT_S, "both workers ready",
                            processes=watched(procs))
            put_int64_release(control, W.GO * 8, 1)
            started = time.monotonic()

            def subscribe() -> int:
                """The compiled subscriber, until it idles; the work is the messages it checked."""
                before = int(cstate[W.CK_MESSAGE])
                return int(W.subscribe(image, control, out, cstate, 2_000_000)) - before

            def read_all_or_failed():
                return cstate[W.CK_MESSAGE] >= W.MESSAGES or cstate[W.CK_FAILURES] != 0 or NotYet(
                    f"stalled at message {cstate[W.CK_MESSAGE]} position {cstate[W.CK_POSITION]}:"
                    f" {control.view(np.int64).tolist()}")

            # The workers run until ALL_DONE, so any exit is a death; an idle subscriber yields (sleep 0).
            await_condition(read_all_or_failed, max(0.0, deadline - time.monotonic()),
                            "the subscriber to check every message", processes=watched(procs), work=subscribe,
                            poll_interval_s=0.0, max_poll_interval_s=0.0)
            position = int(cstate[W.CK_POSITION])
            elapsed = time.monotonic() - started
            put_int64_release(control, W.ALL_DONE * 8, 1)
            join_all(procs, 30)

        stats = control.view(np.int64).tolist()
        assert cstate[W.CK_FAILURES] == 0, (
            f"subscriber saw a bad fragment: kind={cstate[W.CK_FAIL_KIND]} message={cstate[W.CK_FAIL_MESSAGE]}")
        assert cstate[W.CK_MESSAGE] == W.MESSAGES and cstate[W.CK_OFFSET_IN_MESSAGE] == 0
        assert image_poll_batch(image, position, out)[0] == 0  # nothing after the last message
        assert stats[W.R_FAILURES] == 0 and stats[W.S_FAILURES] == 0, stats
        assert stats[W.R_INVALID] == 0
        # The run crossed many terms and the int32 term id wrap, and the network really was lossy.
        assert position > 50 * W.TERM_LENGTH
        assert stats[W.S_DROPPED] > 100 and stats[W.S_DUPLICATED] > 50 and stats[W.S_REORDERED] > 100, stats
        assert stats[W.R_GAPS] > 50 and stats[W.R_NAKS] > 50 and stats[W.S_RETRANSMITTED] > 50, stats
        assert stats[W.R_ALREADY_PRESENT] > 50 and stats[W.R_HEARTBEATS] > 0, stats
        assert cstate[W.CK_FRONTIER_READS] > 100  # the subscriber read at the rebuild frontier as frames landed
        print(f"udp rebuild: {position} bytes in {elapsed:.2f}s, {cstate[W.CK_FRONTIER_READS]} frontier reads; {stats}")
    finally:
        os.sched_setaffinity(0, affinity)
        del image, control
        pub.close()
        image_log.close()
        for f in files:
            f.close()
