"""Our driver's files read back by a parser written here from spec/transport.md's tables alone.

Nothing from ``aeron_numba.layout`` is used to find a field: every offset below is typed from the spec
(§2, §6, §7, §9, §10), so a wrong constant in layout/ cannot hide itself.
"""

from __future__ import annotations

import os
import struct

from aeron_numba.codecs import driver_commands as dc
from aeron_numba.layout import control_protocol as cp
from tests.unit.driver_support import Harness, RawClient


def u32(data, offset):
    return struct.unpack_from("<i", data, offset)[0]


def u64(data, offset):
    return struct.unpack_from("<q", data, offset)[0]


def test_cnc_header_sections_counters_and_error_log_where_the_spec_puts_them(shm_dir):
    harness = Harness(shm_dir / "aeron")
    try:
        client = RawClient(harness.cnc)
        client.send(cp.ADD_PUBLICATION, dc.PublicationMessage, stream_id=1001, channel="aeron:ipc?term-length=64k")
        assert client.ring.write(0x55, b"\x00" * 16)  # an unknown command: one error log entry
        harness.work()
        (_, ready), _ = client.responses()
        data = (shm_dir / "aeron" / "cnc.dat").read_bytes()

        # §6.1 header
        assert u32(data, 0) == (0 << 16) | (2 << 8) | 0 == 512
        to_driver, to_clients, meta_len, values_len, error_len = struct.unpack_from("<5i", data, 4)
        assert (to_driver, to_clients, meta_len, values_len, error_len) == (
            64 * 1024 + 768, 64 * 1024 + 128, 4 * 64 * 1024, 64 * 1024, 64 * 1024)
        assert u64(data, 24) == 2_000_000_000  # client liveness timeout, ns
        assert u64(data, 32) > 0 and u64(data, 40) == os.getpid()
        # §6.2 sections in order after the 128-byte header; file length page aligned
        to_driver_at = 128
        metadata_at = to_driver_at + to_driver + to_clients
        values_at = metadata_at + meta_len
        error_at = values_at + values_len
        assert len(data) == (error_at + error_len + 4095) // 4096 * 4096

        # §7.1 to-driver trailer: the consumer heartbeat is the driver's epoch-ms clock
        trailer = to_driver_at + to_driver - 768
        assert u64(data, trailer + 640) == harness.epoch.time()
        assert u64(data, trailer + 384) == u64(data, trailer + 128)  # head caught up with tail

        # §9 counters: system counter 0 first, then our publication's pub-lmt
        def record(counter_id):
            meta = metadata_at + counter_id * 512
            label_length = u32(data, meta + 128)
            return (u32(data, meta), u32(data, meta + 4), u64(data, meta + 8), data[meta + 16 : meta + 128],
                    data[meta + 132 : meta + 132 + label_length].decode("ascii"))

        state, type_id, deadline, key, label = record(0)
        assert (state, type_id, deadline, label) == (1, 0, 2**63 - 1, "Bytes sent")
        assert u32(key, 0) == 0
        state, type_id, _, key, label = record(24)
        assert (state, type_id, label, u32(key, 0)) == (1, 0, "Client liveness timeouts", 24)
        limit_id = ready.position_limit_counter_id
        state, type_id, _, key, label = record(limit_id)
        assert (state, type_id) == (1, 1)
        registration_id, session_id, stream_id, channel_length = struct.unpack_from("<qiii", key, 0)
        assert (registration_id, session_id, stream_id) == (ready.registration_id, ready.session_id, 1001)
        assert key[20 : 20 + channel_length] == b"aeron:ipc?term-length=64k"
        # §9.4 in the C driver's form, whose label keeps a space after the channel when there is no suffix.
        assert label == f"pub-lmt: {ready.registration_id} {ready.session_id} 1001 aeron:ipc?term-length=64k "
        value_at = values_at + limit_id * 128
        assert u64(data, value_at + 8) == ready.registration_id  # registration id
        assert u64(data, value_at + 16) == client.client_id  # owner id

        # §10 distinct error log: one record with count 1 and both timestamps
        length, count, last_ms, first_ms = struct.unpack_from("<iiqq", data, error_at)
        assert count == 1 and last_ms == first_ms == harness.epoch.time()
        assert b"typeId=85" in data[error_at + 24 : error_at + length]
        assert u32(data, error_at + ((length + 7) // 8 * 8)) == 0  # end of log
    finally:
        harness.close()


def test_log_buffer_metadata_and_frames_where_the_spec_puts_them(shm_dir):
    harness = Harness(shm_dir / "aeron")
    try:
        client = RawClient(harness.cnc)
        channel = "aeron:ipc?term-length=64k|mtu=4096|init-term-id=100|term-id=102|term-offset=96"
        client.send(cp.ADD_EXCLUSIVE_PUBLICATION, dc.PublicationMessage, stream_id=42, channel=channel)
        harness.work()
        (_, ready), = client.responses()
        data = open(ready.log_file_name, "rb").read()
        term = 64 * 1024
        assert len(data) == 3 * term + 4096  # §2 file length with 4 KiB pages
        meta = len(data) - 4096  # metadata is the last 4 KiB
        tails = struct.unpack_from("<3q", data, meta)
        assert tails[2] == (102 << 32) | 96  # active partition (102 - 100) % 3 at the start offset
        assert tails[0] == (102 + 1 - 3) << 32 and tails[1] == (102 + 2 - 3) << 32
        assert u32(data, meta + 24) == 2  # active term count
        assert u64(data, meta + 128) == 2**63 - 1  # end of stream: open
        assert u64(data, meta + 256) == ready.registration_id
        assert struct.unpack_from("<5i", data, meta + 264) == (100, 32, 4096, term, 4096)
        default_header = data[meta + 320 : meta + 352]
        assert struct.unpack_from("<iBBhiiiiq", default_header) == (0, 0, 0xC0, 1, 0, ready.session_id, 42, 100, 0)
    finally:
        harness.close()
