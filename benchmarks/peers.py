"""What a Python user would pick instead, run by the same workers, pinned the same way, in the same run.

* pyzmq over ``ipc://`` (a Unix socket in the run's directory): ``PAIR`` for the round trip, ``PUSH``/``PULL``
  for throughput, default options (blocking ``recv``, high-water mark 1000).
* ``multiprocessing.Pipe()`` (a socketpair), ``send_bytes`` / ``recv_bytes``; the parent creates the pipe
  and hands one end to each worker.
* iceoryx2's Python API (zero-copy shared memory): a publish-subscribe service of fixed-size payloads per
  direction; the receiver polls ``Subscriber.receive`` in a loop (busy, like our subscriber); throughput
  uses a service without safe overflow and sends a sample again while ``send`` reports no recipient (the
  subscriber's buffer was full; iceoryx2 0.10's Python publisher returned 0 recipients there even with
  ``RetryUntilDelivered``), so no sample is lost.

Round trips: A sends a 32-byte message carrying its sequence number, B sends it back, A times it with
``time.perf_counter_ns`` and checks the echo's first byte. Throughput: A sends ``total`` messages, B counts
them, checks every 1024th sequence number and marks the windows (see ``ipc_throughput``).
"""

from __future__ import annotations

import ctypes
import time

import numpy as np

from benchmarks import ipc_throughput, stats

SPIN_CHECK_MASK = 0xFFFF


def _total(case: dict) -> int:
    return case["warmup"] + case["runs"] * case["n"]


def _rtt(case: dict, env, round_trip) -> dict:
    """Run ``round_trip(msg)`` (send ``msg``, wait for the echo, return its first byte) for the case's
    warm-up and runs; returns the latency result."""
    msg, seq_view = ipc_throughput.message_with_sequence(case["size"])
    clock = time.perf_counter_ns
    errors = 0

    def batch(base: int, count: int) -> np.ndarray:
        nonlocal errors
        out = []
        append = out.append
        for i in range(count):
            seq = base + i
            seq_view[0] = seq
            t0 = clock()
            first = round_trip(msg)
            append(clock() - t0)
            if first != seq & 0xFF:
                errors += 1
        return np.array(out, dtype=np.int64)

    warm = batch(0, case["warmup"])
    runs = [batch(case["warmup"] + r * case["n"], case["n"]) for r in range(case["runs"])]
    if errors:
        raise AssertionError(f"{errors} echoes with a wrong sequence number")
    return stats.latency_result(runs, warm, case["windows"], received=_total(case), expected=_total(case), errors=0,
                                timing="perf_counter_ns")


def _consume(case: dict, receive_one) -> dict:
    """Count ``total`` messages from ``receive_one()`` (returns a bytes-like message), marking the windows."""
    marks = []
    count = 0
    wrong = 0
    for target in ipc_throughput.targets(case):
        try:
            while count < target:
                message = receive_one()
                if count & 1023 == 0 and int.from_bytes(message[:8], "little") != count:
                    wrong += 1
                count += 1
        except TimeoutError as exc:
            raise TimeoutError(f"{exc} (received {count} of {ipc_throughput.total(case)})") from None
        marks.append((count, time.perf_counter_ns()))
    if wrong:
        raise AssertionError(f"{wrong} sampled sequence numbers wrong")
    return stats.throughput_result(marks, case["size"], case["runs"], received=count,
                                   expected=ipc_throughput.total(case), errors=wrong)


def _produce(case: dict, send_one) -> dict:
    msg, seq_view = ipc_throughput.message_with_sequence(case["size"])
    total = ipc_throughput.total(case)
    for seq in range(total):
        seq_view[0] = seq
        send_one(msg)
    return {"sent": total}


# ---------------------------------------------------------------------------------------------- pyzmq
def _zmq_socket(env, kind: str, bind: bool):
    import zmq

    context = zmq.Context.instance()
    socket = context.socket(getattr(zmq, kind))
    socket.setsockopt(zmq.LINGER, 0)  # only so that close() never waits; blocking calls are left as they are
    endpoint = f"ipc://{env.path('zmq')}.sock"
    (socket.bind if bind else socket.connect)(endpoint)
    env.on_case_end(socket.close)
    return socket


def zmq_ping(case: dict, env) -> dict:
    socket = _zmq_socket(env, "PAIR", bind=True)
    env.sync(1)
    send, recv = socket.send, socket.recv

    def round_trip(msg):
        send(msg)
        return recv()[0]

    return _rtt(case, env, round_trip)


def zmq_pong(case: dict, env) -> dict:
    env.sync(1)  # A has bound
    socket = _zmq_socket(env, "PAIR", bind=False)
    send, recv = socket.send, socket.recv
    for _ in range(_total(case)):
        send(recv())
    return {"echoed": _total(case)}


def zmq_push(case: dict, env) -> dict:
    socket = _zmq_socket(env, "PUSH", bind=True)
    env.sync(1)
    env.sync(2)  # B has connected
    return _produce(case, socket.send)


def zmq_pull(case: dict, env) -> dict:
    env.sync(1)
    socket = _zmq_socket(env, "PULL", bind=False)
    env.sync(2)
    return _consume(case, socket.recv)


# ------------------------------------------------------------------------------------ multiprocessing.Pipe
# Blocking calls as a user would write them: a partner that died leaves them blocked, and the parent's
# watchdog ends both workers (see runner.py).
def _pipe(env):
    return env.pipe()


def pipe_ping(case: dict, env) -> dict:
    connection = _pipe(env)
    env.sync(1)
    send, receive = connection.send_bytes, connection.recv_bytes

    def round_trip(msg):
        send(msg)
        return receive()[0]

    return _rtt(case, env, round_trip)


def pipe_pong(case: dict, env) -> dict:
    connection = _pipe(env)
    env.sync(1)
    send, receive = connection.send_bytes, connection.recv_bytes
    for _ in range(_total(case)):
        send(receive())
    return {"echoed": _total(case)}


def pipe_produce(case: dict, env) -> dict:
    connection = _pipe(env)
    env.sync(1)
    return _produce(case, connection.send_bytes)


def pipe_consume(case: dict, env) -> dict:
    connection = _pipe(env)
    env.sync(1)
    return _consume(case, connection.recv_bytes)


# ------------------------------------------------------------------------------------------- iceoryx2
_PAYLOAD_TYPES: dict[int, type] = {}


def _payload_type(size: int) -> type:
    """A fixed-size ctypes payload of ``size`` bytes (same type name in both processes)."""
    if size not in _PAYLOAD_TYPES:
        name = f"AeronNumbaBench{size}"
        _PAYLOAD_TYPES[size] = type(name, (ctypes.Structure,), {
            "_fields_": [("data", ctypes.c_uint8 * size)],
            "type_name": staticmethod(lambda name=name: name),
        })
    return _PAYLOAD_TYPES[size]


class _Iceoryx:
    """A node and the ports of one case (deleted at the end of the case)."""

    def __init__(self, env, size: int):
        import iceoryx2 as iox2

        iox2.set_log_level(iox2.LogLevel.Error)  # not the "no config file" notice
        self.iox2 = iox2
        self.env = env
        self.size = size
        self.type = _payload_type(size)
        self.node = iox2.NodeBuilder.new().create(iox2.ServiceType.Ipc)
        self._ports = []
        env.on_case_end(self.close)

    def service(self, direction: str, lossless: bool):
        iox2 = self.iox2
        builder = self.node.service_builder(iox2.ServiceName.new(f"aeron-numba-bench/{self.env.token()}/{direction}"))
        builder = builder.publish_subscribe(self.type)
        if lossless:
            builder = builder.enable_safe_overflow(False).subscriber_max_buffer_size(256)
        return builder.open_or_create()

    def publisher(self, direction: str, lossless: bool = False):
        factory = self.service(direction, lossless).publisher_builder()
        if lossless:
            factory = factory.backpressure_strategy(self.iox2.BackpressureStrategy.RetryUntilDelivered)
        publisher = factory.create()
        self._ports.append(publisher)
        return publisher

    def subscriber(self, direction: str, lossless: bool = False):
        factory = self.service(direction, lossless).subscriber_builder()
        if lossless:
            factory = factory.buffer_size(256)
        subscriber = factory.create()
        self._ports.append(subscriber)
        return subscriber

    def close(self) -> None:
        for port in reversed(self._ports):
            port.delete()
        self._ports = []
        self.node = None


def _iceoryx_sender(publisher, size: int, env=None):
    """``send(msg)``; with ``env`` (throughput) a sample no subscriber took (its buffer was full: ``send``
    returns 0 recipients) is sent again until it is delivered, so the stream is lossless."""
    loan, memmove = publisher.loan_uninit, ctypes.memmove

    def send(msg: np.ndarray) -> None:
        sample = loan()
        memmove(sample.payload_ptr, msg.ctypes.data, size)
        sample.assume_init().send()

    if env is None:
        return send
    deadline = env.case_deadline

    def send_until_delivered(msg: np.ndarray) -> None:
        address = msg.ctypes.data
        spins = 0
        while True:
            sample = loan()
            memmove(sample.payload_ptr, address, size)
            if sample.assume_init().send():
                return
            spins += 1
            if spins & SPIN_CHECK_MASK == 0 and time.monotonic() > deadline:
                raise TimeoutError("iceoryx2 subscriber took no sample before the deadline")

    return send_until_delivered


def _iceoryx_receiver(subscriber, env):
    receive = subscriber.receive
    deadline = env.case_deadline

    def wait_sample():
        spins = 0
        while True:
            sample = receive()
            if sample is not None:
                return sample
            spins += 1
            if spins & SPIN_CHECK_MASK == 0 and time.monotonic() > deadline:
                raise TimeoutError("no iceoryx2 sample before the deadline")

    return wait_sample


def iceoryx_ping(case: dict, env) -> dict:
    iox = _Iceoryx(env, case["size"])
    publisher, subscriber = iox.publisher("ping"), iox.subscriber("pong")
    env.sync(1)  # both sides' ports exist
    publisher.update_connections()
    send, wait_sample = _iceoryx_sender(publisher, case["size"]), _iceoryx_receiver(subscriber, env)
    from_address = ctypes.c_uint8.from_address

    def round_trip(msg):
        send(msg)
        sample = wait_sample()
        first = from_address(sample.payload_ptr).value
        sample.delete()
        return first

    return _rtt(case, env, round_trip)


def iceoryx_pong(case: dict, env) -> dict:
    iox = _Iceoryx(env, case["size"])
    subscriber, publisher = iox.subscriber("ping"), iox.publisher("pong")
    env.sync(1)
    publisher.update_connections()
    loan, memmove, size = publisher.loan_uninit, ctypes.memmove, case["size"]
    wait_sample = _iceoryx_receiver(subscriber, env)
    for _ in range(_total(case)):
        sample = wait_sample()
        reply = loan()
        memmove(reply.payload_ptr, sample.payload_ptr, size)
        sample.delete()
        reply.assume_init().send()
    return {"echoed": _total(case)}


def iceoryx_produce(case: dict, env) -> dict:
    iox = _Iceoryx(env, case["size"])
    env.sync(1)  # B created the service's subscriber first
    publisher = iox.publisher("stream", lossless=True)
    env.sync(2)
    publisher.update_connections()
    return _produce(case, _iceoryx_sender(publisher, case["size"], env))


def iceoryx_consume(case: dict, env) -> dict:
    iox = _Iceoryx(env, case["size"])
    subscriber = iox.subscriber("stream", lossless=True)
    env.sync(1)
    env.sync(2)
    wait_sample = _iceoryx_receiver(subscriber, env)
    size = case["size"]
    string_at = ctypes.string_at

    def receive_one():
        sample = wait_sample()
        head = string_at(sample.payload_ptr, min(size, 8))
        sample.delete()
        return head

    return _consume(case, receive_one)


ROLES = {
    "rtt-zmq": {"A": zmq_ping, "B": zmq_pong},
    "rtt-pipe": {"A": pipe_ping, "B": pipe_pong},
    "rtt-iceoryx2": {"A": iceoryx_ping, "B": iceoryx_pong},
    "tp-zmq": {"A": zmq_push, "B": zmq_pull},
    "tp-pipe": {"A": pipe_produce, "B": pipe_consume},
    "tp-iceoryx2": {"A": iceoryx_produce, "B": iceoryx_consume},
}
