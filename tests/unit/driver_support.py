"""A driver conductor in the test process, driven through do_work() with cached clocks, and a raw client
that speaks the command protocol with the codecs (no client library involved)."""

from __future__ import annotations

from aeron_numba.agent import CachedEpochClock, CachedNanoClock
from aeron_numba.codecs import driver_commands as dc
from aeron_numba.driver import DriverContext, MediaDriver
from aeron_numba.kernels import counters as ck
from aeron_numba.kernels.broadcast import BroadcastReceiver, CopyBroadcastReceiver
from aeron_numba.kernels.ring_buffer import ManyToOneRingBuffer
from aeron_numba.layout import counters as cl

MS = 1_000_000
LIVENESS_MS = 2_000
UNBLOCK_MS = 3_000
TIMER_MS = 100
TERM_LENGTH = 64 * 1024


class RawClient:
    """Writes encoded commands into the to-driver buffer and decodes the broadcast responses."""

    def __init__(self, cnc_file):
        self.ring = ManyToOneRingBuffer(cnc_file.to_driver_buffer)
        self.receiver = CopyBroadcastReceiver(BroadcastReceiver(cnc_file.to_clients_buffer))
        self.client_id = self.ring.next_correlation_id()

    def send(self, msg_type_id: int, message_class, **fields) -> int:
        correlation_id = self.ring.next_correlation_id()
        message = message_class(client_id=self.client_id, correlation_id=correlation_id, **fields)
        assert self.ring.write(msg_type_id, message.encode())
        return correlation_id

    def responses(self) -> list[tuple[int, dc.Message]]:
        out = []
        messages = self.receiver.receive_messages(256)
        assert not isinstance(messages, int), f"broadcast receive failed: {messages}"
        for msg_type_id, body in messages:
            out.append((msg_type_id, dc.decode_response(msg_type_id, body, 0, len(body))))
        return out


class Harness:
    def __init__(self, aeron_dir, **context_overrides):
        self.nano = CachedNanoClock(1_000 * MS)
        self.epoch = CachedEpochClock(1_700_000_000_000)
        settings = dict(
            aeron_dir=str(aeron_dir), ipc_term_buffer_length=TERM_LENGTH,
            client_liveness_timeout_ns=LIVENESS_MS * MS, publication_unblock_timeout_ns=UNBLOCK_MS * MS,
            timer_interval_ns=TIMER_MS * MS, conductor_buffer_length=64 * 1024 + 768,
            clients_buffer_length=64 * 1024 + 128, counters_values_buffer_length=64 * 1024,
            error_buffer_length=64 * 1024, loss_report_buffer_length=4096, publication_linger_timeout_ns=0,
            counter_free_to_reuse_timeout_ns=0,
        )
        ctx = DriverContext(**(settings | context_overrides))
        self.driver = MediaDriver(ctx, nano_clock=self.nano.nano_time, epoch_clock=self.epoch.time, warm_up=False)
        self.conductor = self.driver.conductor
        self.cnc = self.driver.cnc_file
        self.reader = ck.CountersReader(self.cnc.counters_metadata_buffer, self.cnc.counters_values_buffer)

    def work(self, cycles: int = 1) -> None:
        for _ in range(cycles):
            self.conductor.do_work()

    def advance(self, ms: int, keep_alive=()) -> None:
        """Let time pass in timer-sized steps, running a duty cycle at each; the ``keep_alive`` clients
        write their heartbeat counters like live clients do."""
        for _ in range(ms // TIMER_MS):
            self.nano.advance(TIMER_MS * MS)
            self.epoch.advance(TIMER_MS)
            for client in keep_alive:
                counter_id = self.reader.find_by_type_id_and_registration_id(
                    cl.CLIENT_HEARTBEAT_TYPE_ID, client.client_id)
                ck.set_counter_value(self.cnc.counters_values_buffer, counter_id, self.epoch.time())
            self.work()

    def network_work(self) -> None:
        """One duty cycle of the sender and of the receiver: in SHARED mode the agents themselves; with threads
        (SHARED_NETWORK, DEDICATED) their runners' agents, which first apply the commands the conductor queued,
        driven here by hand on this thread, in Aeron's order (conductor, sender, receiver). Their Python cycles only,
        as in SHARED mode here: the compiled network cycles read the system clock, not the harness's cached one."""
        if self.driver.network_runners:
            for runner in self.driver.network_runners:
                agent = runner.agent
                for queue in agent.queues:
                    queue.drain()
                for network_agent in agent.agents:
                    network_agent.do_work()
        else:
            network = self.conductor.network
            network.sender.do_work()
            network.receiver.do_work()

    def system_counter(self, system_id: int) -> int:
        return self.conductor.system_counters.get(system_id)

    def counters_by_type(self, type_id: int) -> list:
        return [c for c in self.reader.counters() if c.type_id == type_id]

    def close(self) -> None:
        self.conductor.on_close()
        self.driver.close()


def run(harness, client, cycles: int, step_ms: int = 1) -> None:
    """``cycles`` duty cycles of the conductor, sender and receiver in turn, ``step_ms`` apart on the cached clocks,
    with ``client``'s heartbeat kept fresh."""
    for _ in range(cycles):
        harness.nano.advance(step_ms * MS)
        harness.epoch.advance(step_ms)
        harness.conductor.do_work()
        harness.network_work()
        harness.conductor.counters.set_counter_value(
            harness.reader.find_by_type_id_and_registration_id(cl.CLIENT_HEARTBEAT_TYPE_ID, client.client_id),
            harness.epoch.time())
