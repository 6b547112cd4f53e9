"""The scenario registry: ``SCENARIOS`` maps a name to its ``Scenario`` instance (in issue order)."""

from chaos.scenarios.subscriber_killed import SubscriberKilled
from chaos.scenarios.shared_publisher_killed import SharedPublisherKilled
from chaos.scenarios.driver_killed import DriverKilled
from chaos.scenarios.garbage_writer import GarbageWriter
from chaos.scenarios.claim_killed import PublisherKilledMidClaim
from chaos.scenarios.client_paused import ClientPaused
from chaos.scenarios.slow_consumer import SlowConsumer
from chaos.scenarios.exit_without_close import ExitWithoutClose

SCENARIOS = {s.name: s for s in (SubscriberKilled(), SharedPublisherKilled(), PublisherKilledMidClaim(),
                                 ClientPaused(), DriverKilled(), SlowConsumer(), GarbageWriter(),
                                 ExitWithoutClose())}
