"""Agents and how they run: the ``Agent`` contract, runners, idle strategies, clocks, duty-cycle tracking.

Agrona's ``org.agrona.concurrent`` contracts in snake_case (STYLE.md "Agrona"): one role per agent, a
``do_work()`` that returns a work count, and a runner that counts errors and keeps going.
"""

from aeron_numba.agent.agent import Agent, AgentTerminationException, CompositeAgent
from aeron_numba.agent.agent_runner import AgentInvoker, AgentRunner, StopOnSignals, close_on_signals
from aeron_numba.agent.clock import (
    CachedEpochClock,
    CachedNanoClock,
    SystemEpochClock,
    SystemEpochNanoClock,
    SystemNanoClock,
)
from aeron_numba.agent.duty_cycle_tracker import DutyCycleStatistics, DutyCycleTracker
from aeron_numba.agent.idle_strategy import (
    IDLE_STRATEGY_NAMES,
    BackoffIdleStrategy,
    BusySpinIdleStrategy,
    ControllableIdleStrategy,
    IdleStrategy,
    NoOpIdleStrategy,
    SleepingIdleStrategy,
    SleepingMillisIdleStrategy,
    YieldingIdleStrategy,
    idle_strategy_from_name,
    park_ns,
    parse_duration_ns,
)

__all__ = [
    "Agent",
    "AgentInvoker",
    "AgentRunner",
    "AgentTerminationException",
    "BackoffIdleStrategy",
    "BusySpinIdleStrategy",
    "CachedEpochClock",
    "CachedNanoClock",
    "CompositeAgent",
    "ControllableIdleStrategy",
    "DutyCycleStatistics",
    "DutyCycleTracker",
    "IDLE_STRATEGY_NAMES",
    "IdleStrategy",
    "NoOpIdleStrategy",
    "SleepingIdleStrategy",
    "SleepingMillisIdleStrategy",
    "SystemEpochClock",
    "SystemEpochNanoClock",
    "SystemNanoClock",
    "YieldingIdleStrategy",
    "StopOnSignals",
    "close_on_signals",
    "idle_strategy_from_name",
    "park_ns",
    "parse_duration_ns",
]
