"""The member's composite duty cycle (``clustered_media_driver._MemberAgent``): what the agents after the driver
write to the network goes out in the same cycle, as soon as it is written."""

from __future__ import annotations

import numpy as np

from aeron_numba.agent import AgentInvoker
from aeron_numba.agent.invoked_agents import InvokedAgent, WatchedCompositeAgent
from aeron_numba.cluster.clustered_media_driver import _MemberAgent
from aeron_numba.driver.network_stages import NetworkStages
from aeron_numba.kernels.cluster_append_position import append_position_stage
from tests.unit.agent.test_invoked_agents import CompleteWordAgent, HandingAgent, ManualClock, _cycle


class _Later(CompleteWordAgent):
    """An agent after the consensus module that notes how often the network cycles had run when it ran."""

    def __init__(self, network):
        super().__init__("clustered-service")
        self.network, self.network_calls_seen = network, []

    def do_work(self):
        self.network_calls_seen.append(self.network.calls)
        return super().do_work()


def test_the_network_cycles_run_again_as_soon_as_an_agent_after_the_driver_worked():
    network, conductor = CompleteWordAgent("network-cycles"), CompleteWordAgent("driver-conductor")
    parts = WatchedCompositeAgent(conductor, network, nano_time=ManualClock())
    consensus = HandingAgent("consensus-module", network)  # its work is the network's to send
    later = _Later(network)
    member = _MemberAgent(InvokedAgent(AgentInvoker(parts)), consensus, later, driver_parts=parts,
                          network_cycles_index=1, stages=NetworkStages())
    member.on_start()
    for _ in range(3):
        _cycle(member)
    calls, cycles = (network.calls, conductor.calls, consensus.calls), list(parts.cycles)
    network.word[0], consensus.word[0], later.word[0] = 1, 1, 1  # a datagram, which the others' work follows
    # The driver's work, the consensus module's, the network cycles sending it, the later agent's (whose work moved
    # nothing of the driver's: no run of the network cycles after it).
    assert _cycle(member)[0] == 4
    assert (network.calls, conductor.calls, consensus.calls) == (calls[0] + 2, calls[1], calls[2] + 1)
    assert later.network_calls_seen[-1] == calls[0] + 2  # sent before the agents after the consensus module ran
    assert network.seen == 2 and parts.cycles == [cycles[0], cycles[1] + 2]
    network.word[0] = 3  # the driver alone worked (a peer's datagram): nothing more
    assert _cycle(member)[0] == 1
    assert (network.calls, consensus.calls) == (calls[0] + 3, calls[2] + 1)
    consensus.word[0] = 2  # the consensus module alone: the driver, not run yet, runs after it in another pass
    assert _cycle(member)[0] == 2
    assert (network.calls, consensus.calls) == (calls[0] + 4, calls[2] + 2) and network.seen == 4


def test_the_network_cycles_run_again_when_an_agent_left_their_stages_work_outside_them():
    network, conductor = CompleteWordAgent("network-cycles"), CompleteWordAgent("driver-conductor")
    parts = WatchedCompositeAgent(conductor, network, nano_time=ManualClock())
    consensus, later = CompleteWordAgent("consensus-module"), CompleteWordAgent("clustered-service")
    stages, due = NetworkStages(), [False]
    key = stages.add(append_position_stage, np.zeros(64, np.int64), due=lambda: due[0])
    member = _MemberAgent(InvokedAgent(AgentInvoker(parts)), consensus, later, driver_parts=parts,
                          network_cycles_index=1, stages=stages)
    member.on_start()
    for _ in range(3):
        _cycle(member)
    calls = network.calls
    network.word[0], consensus.word[0] = 1, 1  # a datagram, and the consensus module's work that follows it
    _cycle(member)
    assert network.calls == calls + 1  # its work moved nothing of the driver's and left the stages nothing
    network.word[0], consensus.word[0], due[0] = 2, 2, True  # a commit position set in Python: a stage's work
    _cycle(member)
    assert network.calls == calls + 3
    stages.remove(key)  # a stage gone takes its check with it
    network.word[0], consensus.word[0] = 3, 3
    _cycle(member)
    assert network.calls == calls + 4
