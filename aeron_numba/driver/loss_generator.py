"""Loss generators for the UDP endpoints, like Aeron's debug channel endpoints: drop datagrams on purpose.

Tests and chaos scenarios switch them at run time through ``loss-control.dat`` in the aeron dir (see
``LossControl``): a random fraction of data or control datagrams, a fixed gap of a term (every datagram carrying
part of it dropped the first time it is sent, so a retransmit can fill it), and a partition that blocks every
datagram to or from chosen UDP ports (on one host, a port is a peer). The endpoints ask ``should_drop_*`` once per
datagram; with the control file absent or all zero nothing is dropped and the cost is one int64 load per duty
cycle.

Blocked hosts cut every datagram sent to chosen IPv4 addresses, whatever their ports: the cluster harness puts
each member on its own loopback address and cuts a link between two members by blocking each one's address in the
other's driver, which also catches ephemeral ports (replication, archive responses) that a port list cannot name.
Only sends are checked: on loopback a datagram from a socket bound to 0.0.0.0 leaves with source 127.0.0.1
whoever sent it, so a receive-side check would cut the wrong peer.

File layout (ours, not Aeron's; native byte order, 8-byte aligned):

=======  ====  ==============================================================
offset   size  field
=======  ====  ==============================================================
0        8     version: odd while a writer changes the fields (a seqlock)
8        4     receive data loss rate, parts per million
12       4     receive control loss rate, ppm
16       4     send data loss rate, ppm
20       4     send control loss rate, ppm
24       8     seed for the random drops
32       4     gap term id
36       4     gap term offset
40       4     gap length (0 = no gap)
44       4     number of blocked ports (<= MAX_BLOCKED_PORTS)
48       4*16  blocked UDP ports
112      4     number of blocked hosts (<= MAX_BLOCKED_HOSTS)
116      4*16  blocked IPv4 addresses (network byte order)
184      8     taken: the last version a loss generator of the driver took (its
               endpoints' generators all take it before their next read)
=======  ====  ==============================================================
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from aeron_numba.errors import ConfigurationError
from aeron_numba.kernels import atomics_for_python
from aeron_numba.kernels import loss_generator as kernels
from aeron_numba.kernels.loss_generator import PPM
from aeron_numba.kernels.minstd import seed_state
from aeron_numba.layout import frame
from aeron_numba.layout import network_state as ns
from aeron_numba.layout.mapped_file import MappedFile

LOSS_CONTROL_FILE = "loss-control.dat"
MAX_BLOCKED_PORTS = MAX_BLOCKED_HOSTS = ns.LOSS_MAX_BLOCKED
VERSION_OFFSET = 0
RECEIVE_DATA_RATE_OFFSET = 8
RECEIVE_CONTROL_RATE_OFFSET = 12
SEND_DATA_RATE_OFFSET = 16
SEND_CONTROL_RATE_OFFSET = 20
SEED_OFFSET = 24
GAP_TERM_ID_OFFSET = 32
GAP_TERM_OFFSET_OFFSET = 36
GAP_LENGTH_OFFSET = 40
BLOCKED_PORT_COUNT_OFFSET = 44
BLOCKED_PORTS_OFFSET = 48
BLOCKED_HOST_COUNT_OFFSET = BLOCKED_PORTS_OFFSET + 4 * MAX_BLOCKED_PORTS
BLOCKED_HOSTS_OFFSET = BLOCKED_HOST_COUNT_OFFSET + 4
TAKEN_VERSION_OFFSET = 184
LOSS_CONTROL_LENGTH = 4096


@dataclass
class LossSettings:
    """What to drop. Rates are fractions in [0, 1]."""

    receive_data_rate: float = 0.0
    receive_control_rate: float = 0.0
    send_data_rate: float = 0.0
    send_control_rate: float = 0.0
    seed: int = 0
    gap_term_id: int = 0
    gap_term_offset: int = 0
    gap_length: int = 0
    blocked_ports: tuple[int, ...] = ()
    blocked_hosts: tuple[str, ...] = ()  # IPv4 addresses, dotted; what is sent to them is dropped

    def check(self) -> "LossSettings":
        for name in ("receive_data_rate", "receive_control_rate", "send_data_rate", "send_control_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigurationError(f"{name}={value} must be in [0, 1]")
        if self.gap_length < 0 or self.gap_term_offset < 0:
            raise ConfigurationError(
                f"gap_term_offset={self.gap_term_offset} and gap_length={self.gap_length} must be >= 0")
        if len(self.blocked_ports) > MAX_BLOCKED_PORTS:
            raise ConfigurationError(f"{len(self.blocked_ports)} blocked ports > MAX_BLOCKED_PORTS={MAX_BLOCKED_PORTS}")
        for port in self.blocked_ports:
            if not 0 < port <= 65535:
                raise ConfigurationError(f"blocked port {port} must be in [1, 65535]")
        if len(self.blocked_hosts) > MAX_BLOCKED_HOSTS:
            raise ConfigurationError(f"{len(self.blocked_hosts)} blocked hosts > MAX_BLOCKED_HOSTS={MAX_BLOCKED_HOSTS}")
        for host in self.blocked_hosts:
            try:
                socket.inet_aton(host)
            except (OSError, TypeError):
                raise ConfigurationError(f"blocked host {host!r} must be an IPv4 address") from None
        return self

    @property
    def drops_anything(self) -> bool:
        """Whether any datagram could be dropped under these settings (else the endpoints skip the checks)."""
        return bool(self.receive_data_rate or self.receive_control_rate or self.send_data_rate or
                    self.send_control_rate or self.gap_length > 0 or self.blocked_ports or self.blocked_hosts)


# Plain field loads and stores: the version word (acquire/release) orders them, a seqlock; x86 keeps loads
# in order, so the second version read sees whether a writer came by meanwhile.
def _i32(buf, offset):
    return int(buf[offset:offset + 4].view(np.int32)[0])


def _put_i32(buf, offset, value):
    buf[offset:offset + 4].view(np.int32)[0] = value


def _i64(buf, offset):
    return int(buf[offset:offset + 8].view(np.int64)[0])


class LossControl:
    """The control file: ``LossControl.create(aeron_dir)`` (driver) / ``open(aeron_dir)`` (tests, chaos)."""

    def __init__(self, mapped: MappedFile):
        self._mapped = mapped
        self.buffer = mapped.buffer

    @classmethod
    def create(cls, aeron_dir: str | os.PathLike) -> "LossControl":
        return cls(MappedFile.create(Path(aeron_dir) / LOSS_CONTROL_FILE, LOSS_CONTROL_LENGTH, exist_ok=True))

    @classmethod
    def open(cls, aeron_dir: str | os.PathLike) -> "LossControl":
        return cls(MappedFile.open(Path(aeron_dir) / LOSS_CONTROL_FILE, LOSS_CONTROL_LENGTH))

    def version(self) -> int:
        return int(atomics_for_python.get_int64_acquire(self.buffer, VERSION_OFFSET))

    def watch_version(self, watch) -> None:
        """Have an idle watch (``agent/idle_watch.py``) end its wait when new settings are written."""
        watch.watch_int64(self.buffer, VERSION_OFFSET)

    def taken_version(self) -> int:
        """The last version the driver's loss generators took: a writer that waits for ``write``'s version here
        knows the datagrams read from then on are judged by its settings."""
        return int(atomics_for_python.get_int64_acquire(self.buffer, TAKEN_VERSION_OFFSET))

    def note_taken(self, version: int) -> None:
        atomics_for_python.put_int64_release(self.buffer, TAKEN_VERSION_OFFSET, version)

    def write(self, settings: LossSettings) -> int:
        """Publish new settings (single writer at a time): version odd, fields, version even. Returns the
        version, for ``taken_version``."""
        settings.check()
        buf = self.buffer
        version = self.version()
        atomics_for_python.put_int64_release(buf, VERSION_OFFSET, version + 1)
        for offset, rate in ((RECEIVE_DATA_RATE_OFFSET, settings.receive_data_rate),
                             (RECEIVE_CONTROL_RATE_OFFSET, settings.receive_control_rate),
                             (SEND_DATA_RATE_OFFSET, settings.send_data_rate),
                             (SEND_CONTROL_RATE_OFFSET, settings.send_control_rate)):
            _put_i32(buf, offset, round(rate * PPM))
        buf[SEED_OFFSET:SEED_OFFSET + 8].view(np.int64)[0] = settings.seed
        _put_i32(buf, GAP_TERM_ID_OFFSET, settings.gap_term_id)
        _put_i32(buf, GAP_TERM_OFFSET_OFFSET, settings.gap_term_offset)
        _put_i32(buf, GAP_LENGTH_OFFSET, settings.gap_length)
        _put_i32(buf, BLOCKED_PORT_COUNT_OFFSET, len(settings.blocked_ports))
        for index, port in enumerate(settings.blocked_ports):
            _put_i32(buf, BLOCKED_PORTS_OFFSET + 4 * index, port)
        _put_i32(buf, BLOCKED_HOST_COUNT_OFFSET, len(settings.blocked_hosts))
        for index, host in enumerate(settings.blocked_hosts):
            at = BLOCKED_HOSTS_OFFSET + 4 * index
            buf[at:at + 4] = np.frombuffer(socket.inet_aton(host), dtype=np.uint8)
        atomics_for_python.put_int64_release(buf, VERSION_OFFSET, version + 2)
        return version + 2

    def read(self) -> tuple[int, LossSettings] | None:
        """(version, settings), or None while a writer is mid-update (try again next cycle)."""
        buf = self.buffer
        version = self.version()
        if version & 1:
            return None
        count = min(max(_i32(buf, BLOCKED_PORT_COUNT_OFFSET), 0), MAX_BLOCKED_PORTS)
        host_count = min(max(_i32(buf, BLOCKED_HOST_COUNT_OFFSET), 0), MAX_BLOCKED_HOSTS)
        settings = LossSettings(
            receive_data_rate=_i32(buf, RECEIVE_DATA_RATE_OFFSET) / PPM,
            receive_control_rate=_i32(buf, RECEIVE_CONTROL_RATE_OFFSET) / PPM,
            send_data_rate=_i32(buf, SEND_DATA_RATE_OFFSET) / PPM,
            send_control_rate=_i32(buf, SEND_CONTROL_RATE_OFFSET) / PPM,
            seed=_i64(buf, SEED_OFFSET),
            gap_term_id=_i32(buf, GAP_TERM_ID_OFFSET),
            gap_term_offset=_i32(buf, GAP_TERM_OFFSET_OFFSET),
            gap_length=_i32(buf, GAP_LENGTH_OFFSET),
            blocked_ports=tuple(_i32(buf, BLOCKED_PORTS_OFFSET + 4 * i) for i in range(count)),
            blocked_hosts=tuple(socket.inet_ntoa(bytes(buf[BLOCKED_HOSTS_OFFSET + 4 * i:BLOCKED_HOSTS_OFFSET + 4 * i + 4]))
                                for i in range(host_count)),
        )
        if self.version() != version:
            return None
        return version, settings

    def close(self) -> None:
        self._mapped.close()


class LossGenerator:
    """Per-endpoint drop decisions from the current ``LossSettings`` (refreshed by ``update``): the settings live
    in ``state`` (and the fixed gap's frames already dropped in ``gap_dropped``) for ``kernels/loss_generator.py``,
    which the compiled data path and these methods both call."""

    #: How many times a generator of this process took new settings. Each update hands the compiled path new
    #: ``state`` and ``gap_dropped`` arrays, so tables that keep their addresses rebuild when this moves.
    settings_taken = 0

    def __init__(self):
        self.settings = LossSettings()
        self.version = -1
        self.state = np.zeros(ns.LOSS_STATE_LENGTH, np.int64)
        self.gap_dropped = np.zeros(0, np.uint8)

    def update(self, control: LossControl | None) -> None:
        if control is None or control.version() == self.version:
            return
        snapshot = control.read()
        if snapshot is None:
            return
        self.version, settings = snapshot
        self.settings = settings
        state = np.zeros(ns.LOSS_STATE_LENGTH, np.int64)
        for index, rate in ((ns.LOSS_RECEIVE_DATA_PPM, settings.receive_data_rate),
                            (ns.LOSS_RECEIVE_CONTROL_PPM, settings.receive_control_rate),
                            (ns.LOSS_SEND_DATA_PPM, settings.send_data_rate),
                            (ns.LOSS_SEND_CONTROL_PPM, settings.send_control_rate)):
            state[index] = round(rate * PPM)
        state[ns.LOSS_RANDOM_STATE] = seed_state(settings.seed)
        state[ns.LOSS_GAP_TERM_ID] = settings.gap_term_id
        state[ns.LOSS_GAP_TERM_OFFSET] = settings.gap_term_offset
        state[ns.LOSS_GAP_LENGTH] = settings.gap_length
        state[ns.LOSS_BLOCKED_PORT_COUNT] = len(settings.blocked_ports)
        state[ns.LOSS_BLOCKED_PORTS:ns.LOSS_BLOCKED_PORTS + len(settings.blocked_ports)] = settings.blocked_ports
        hosts = [host_as_int32(host) for host in settings.blocked_hosts]
        state[ns.LOSS_BLOCKED_HOST_COUNT] = len(hosts)
        state[ns.LOSS_BLOCKED_HOSTS:ns.LOSS_BLOCKED_HOSTS + len(hosts)] = hosts
        state[ns.LOSS_DROPPED] = self.state[ns.LOSS_DROPPED]
        state[ns.LOSS_IS_ACTIVE] = 1 if settings.drops_anything else 0
        self.gap_dropped = np.zeros(max(0, settings.gap_length) // (8 * frame.FRAME_ALIGNMENT) + 1, np.uint8)
        self.state = state  # a new array: tables holding the old one's address rebuild on ``settings_taken``
        LossGenerator.settings_taken += 1
        control.note_taken(self.version)

    @property
    def is_active(self) -> bool:
        """Settings that may drop something are in force."""
        return self.settings.drops_anything

    @property
    def dropped(self) -> int:
        return int(self.state[ns.LOSS_DROPPED])

    def should_drop_receive(self, buffer: np.ndarray, length: int, source_port: int, local_port: int) -> bool:
        """A datagram just received on ``local_port`` from ``source_port``."""
        return bool(kernels.should_drop_receive(self.state, self.gap_dropped, buffer, 0, length, source_port,
                                                local_port))

    def should_drop_send(self, buffer: np.ndarray, length: int, destination_port: int, local_port: int,
                         destination_host: str = "0.0.0.0") -> bool:
        """A datagram about to be sent from ``local_port`` to ``destination_host:destination_port``."""
        return bool(kernels.should_drop_send(self.state, buffer, 0, length, destination_port, local_port,
                                             host_as_int32(destination_host)))


def host_as_int32(host: str) -> int:
    """An IPv4 address as the kernels compare it: its four network-order bytes read as a native int32."""
    return int.from_bytes(socket.inet_aton(host), "little", signed=True)
