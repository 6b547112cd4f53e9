"""The ``Agent`` contract and ``CompositeAgent`` (Agrona ``Agent``/``CompositeAgent``).

An agent is one role's duty cycle: ``do_work()`` runs a bounded slice of every duty and returns how much
it did, so the caller's idle strategy can back off when nothing happened. Agents never block and never
loop forever; the runner (``AgentRunner``) or an invoker (``AgentInvoker``) owns the loop. Many agents
can share one process as a ``CompositeAgent`` (Aeron's SHARED threading mode). An agent may also offer
``add_idle_watch(watch) -> bool`` (``agent/idle_watch.py``) so that its runner can take its idle parks in
compiled code.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from aeron_numba.errors import AeronError


class AgentTerminationException(AeronError):
    """Raised by an agent's ``do_work`` to stop its runner cleanly (not counted as an error)."""


@runtime_checkable
class Agent(Protocol):
    """What ``AgentRunner`` drives. ``on_start``/``on_close`` run once, on the runner's thread."""

    def on_start(self) -> None: ...

    def do_work(self) -> int: ...

    def on_close(self) -> None: ...

    def role_name(self) -> str: ...


def _raise_collected(what: str, errors: list[BaseException]) -> None:
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup(f"{len(errors)} agents failed in {what}", errors)


class CompositeAgent:
    """Several agents run as one: work counts add up, every agent is started and closed.

    If one agent's ``do_work`` raises, the next duty cycle resumes with the agent after it, so a
    failing agent cannot starve the ones behind it. ``on_start``/``on_close`` reach every agent even
    when some raise; the errors are re-raised afterwards (one as is, several as an ``ExceptionGroup``).
    """

    def __init__(self, *agents: Agent):
        if not agents:
            raise ValueError("CompositeAgent needs at least one agent, got 0")
        for agent in agents:
            if not isinstance(agent, Agent):
                raise TypeError(f"{agent!r} is not an Agent (needs on_start, do_work, on_close, role_name)")
        self.agents: tuple[Agent, ...] = tuple(agents)
        self._role_name = "[" + ",".join(agent.role_name() for agent in agents) + "]"
        self._next_index = 0

    def role_name(self) -> str:
        return self._role_name

    def on_start(self) -> None:
        errors = []
        for agent in self.agents:
            try:
                agent.on_start()
            except Exception as exc:
                errors.append(exc)
        _raise_collected("on_start", errors)

    def do_work(self) -> int:
        work_count = 0
        agents = self.agents
        # _next_index advances before the call: after an exception the next cycle starts past the culprit.
        while self._next_index < len(agents):
            agent = agents[self._next_index]
            self._next_index += 1
            work_count += agent.do_work()
        self._next_index = 0
        return work_count

    def add_idle_watch(self, watch) -> bool:
        """Every agent's idle watch (``agent/idle_watch.py``); False if any agent has none or cannot name its work."""
        for agent in self.agents:
            add = getattr(agent, "add_idle_watch", None)
            if add is None or not add(watch):
                return False
        return True

    def on_close(self) -> None:
        errors = []
        for agent in self.agents:
            try:
                agent.on_close()
            except Exception as exc:
                errors.append(exc)
        _raise_collected("on_close", errors)

    def __repr__(self) -> str:
        return f"CompositeAgent{self._role_name}"
