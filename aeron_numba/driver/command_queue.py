"""The queue that carries commands from one driver agent's thread to another's (Aeron's agent command queues).

Aeron's conductor, sender and receiver exchange commands through bounded concurrent queues of small command
objects, each drained by its agent at the start of its duty cycle (``SenderProxy``, ``ReceiverProxy``,
``DriverConductorProxy``). Here a command is a bound method and its arguments on a ``collections.deque``:
``append`` and ``popleft`` are each one atomic operation under the GIL, so any number of threads may offer while
the one owning agent drains, with no lock. The queue is unbounded (Aeron's hold 1024 commands and a full one
makes the offering agent retry): its producers are the driver's own agents, which offer one command per client
command or resource change, never per message.

``offers`` is an int64 word in memory that every offer changes (a sequence number): an agent whose runner parks
in compiled code while idle (``agent/idle_watch.py``) watches it, so a command wakes it at once.
"""

from __future__ import annotations

import itertools
from collections import deque
from typing import Any, Callable

import numpy as np

#: Most commands one duty cycle applies (Aeron's agents drain a bounded batch per cycle too, so a flood of
#: commands cannot starve the data path); the rest wait for the next cycle, in order.
DRAIN_LIMIT = 64


class CommandQueue:
    """Commands for one agent, offered from any thread and applied in order on the agent's thread by ``drain``."""

    def __init__(self, name: str):
        self.name = name
        self._commands: deque[tuple[Callable[..., Any], tuple]] = deque()
        self._sequence = itertools.count(1)  # next() is atomic under the GIL
        self.offers = np.zeros(1, np.int64)  # changes on every offer: an idle watch wakes on it

    def offer(self, command: Callable[..., Any], *args) -> None:
        """Queue ``command(*args)`` for the owning agent's next duty cycle."""
        self._commands.append((command, args))
        self.offers[0] = next(self._sequence)

    def drain(self, limit: int = DRAIN_LIMIT) -> int:
        """Apply up to ``limit`` queued commands on the calling (owning) thread, oldest first; returns how many.

        A command that raises is gone (it is not retried); the exception goes to the agent's runner, which counts
        and logs it, and the commands after it run on the next cycle.
        """
        commands = self._commands
        count = 0
        while count < limit and commands:
            command, args = commands.popleft()
            count += 1
            command(*args)
        return count

    def drain_all(self) -> int:
        """Apply every queued command (a driver closing, after the agent's thread has stopped)."""
        count = 0
        while self._commands:
            count += self.drain()
        return count

    def __len__(self) -> int:
        return len(self._commands)

    def __repr__(self) -> str:
        return f"CommandQueue({self.name!r}, queued={len(self._commands)})"


class CommandProxy:
    """What the driver's three proxies share: each command runs at once on the caller's thread (SHARED mode, or a
    driver closing after the target's thread stopped: ``queue`` None) or is queued for the target's thread."""

    def __init__(self, queue: CommandQueue | None = None):
        self.queue = queue

    @property
    def is_direct(self) -> bool:
        return self.queue is None

    def _run(self, command, *args) -> None:
        if self.queue is None:
            command(*args)
        else:
            self.queue.offer(command, *args)

    def run_directly(self) -> None:
        """From now on run every command on the caller's thread (the target's thread has stopped); the commands
        still queued run first, in order."""
        queue, self.queue = self.queue, None
        if queue is not None:
            queue.drain_all()
