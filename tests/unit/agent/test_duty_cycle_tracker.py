"""SharedDutyCycleTracker: one measured cycle for the agents sharing a thread (aeronmd's SHARED mode)."""

import pytest

from aeron_numba.agent.duty_cycle_tracker import SharedDutyCycleTracker
from aeron_numba.errors import ConfigurationError


class MaxCounter:
    def __init__(self):
        self.value = 0
        self.proposals = 0

    def propose_max(self, value):
        self.proposals += 1
        self.value = max(self.value, value)


def test_each_agent_gets_the_shared_maximum_and_counts_stalls_past_its_own_threshold():
    maxima = [MaxCounter() for _ in range(3)]
    exceeded = [[], [], []]
    tracker = SharedDutyCycleTracker([(maxima[i], (lambda i=i: exceeded[i].append(1)), threshold)
                                      for i, threshold in enumerate((100, 10, 1_000))])
    for cycle_ns in (5, 50, 20, 150, 7, -3):
        tracker.record(cycle_ns)
    assert [m.value for m in maxima] == [150, 150, 150]
    assert [len(e) for e in exceeded] == [1, 3, 0]  # >100: 150; >10: 50, 20, 150; >1000: none


def test_a_cycle_below_the_maximum_and_every_threshold_proposes_nothing():
    counter = MaxCounter()
    tracker = SharedDutyCycleTracker([(counter, None, 1_000)])
    for cycle_ns in (500, 100, 200, 499):
        tracker.record(cycle_ns)
    assert counter.value == 500 and counter.proposals == 1


@pytest.mark.parametrize("agents", [[], [(None, None, 0)], [(None, None, 10), (None, None, -1)]])
def test_no_agents_or_a_threshold_that_is_not_positive_is_refused(agents):
    with pytest.raises(ConfigurationError):
        SharedDutyCycleTracker(agents)
