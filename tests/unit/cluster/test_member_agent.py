"""The member's composite duty cycle (``clustered_media_driver._MemberAgent``): what the agents after the driver
write to the network goes out in the same cycle."""

from __future__ import annotations

from aeron_numba.agent import AgentInvoker
from aeron_numba.agent.invoked_agents import InvokedAgent, WatchedCompositeAgent
from aeron_numba.cluster.clustered_media_driver import _MemberAgent
from tests.unit.agent.test_invoked_agents import CompleteWordAgent, HandingAgent, ManualClock, _cycle


def test_a_cycle_in_which_an_agent_after_the_driver_worked_ends_with_the_network_cycles_run_again():
    network, conductor = CompleteWordAgent("network-cycles"), CompleteWordAgent("driver-conductor")
    parts = WatchedCompositeAgent(conductor, network, nano_time=ManualClock())
    consensus = HandingAgent("consensus-module", network)  # its work is the network's to send
    member = _MemberAgent(InvokedAgent(AgentInvoker(parts)), consensus, driver_parts=parts, network_cycles_index=1)
    member.on_start()
    for _ in range(3):
        _cycle(member)
    calls, cycles = (network.calls, conductor.calls, consensus.calls), list(parts.cycles)
    network.word[0], consensus.word[0] = 1, 1  # a datagram for the driver, which the consensus module's work follows
    assert _cycle(member)[0] == 3  # the driver's work, the consensus module's, and the network cycles sending it
    assert (network.calls, conductor.calls, consensus.calls) == (calls[0] + 2, calls[1], calls[2] + 1)
    assert network.seen == 2 and parts.cycles == [cycles[0], cycles[1] + 2]
    network.word[0] = 3  # the driver alone worked (a peer's datagram): nothing more
    assert _cycle(member)[0] == 1
    assert (network.calls, consensus.calls) == (calls[0] + 3, calls[2] + 1)
    consensus.word[0] = 2  # the consensus module alone: the driver, not run yet, runs after it in another pass
    assert _cycle(member)[0] == 2
    assert (network.calls, consensus.calls) == (calls[0] + 4, calls[2] + 2) and network.seen == 4
