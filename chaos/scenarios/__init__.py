"""The scenario registry: ``SCENARIOS`` maps a name to its ``Scenario`` instance (the issue's eight in its order, then the ones added)."""

from chaos.scenarios.subscriber_killed import SubscriberKilled
from chaos.scenarios.shared_publisher_killed import SharedPublisherKilled
from chaos.scenarios.driver_killed import DriverKilled
from chaos.scenarios.garbage_writer import GarbageWriter
from chaos.scenarios.claim_killed import PublisherKilledMidClaim
from chaos.scenarios.client_paused import ClientPaused
from chaos.scenarios.slow_consumer import SlowConsumer
from chaos.scenarios.exit_without_close import ExitWithoutClose
from chaos.scenarios.subscriber_stalled import SubscriberStalled
from chaos.scenarios.log_corrupted import LogByteCorrupted
from chaos.scenarios.huge_messages import HugeMessages
from chaos.scenarios.disk_full import DiskFull
from chaos.scenarios.driver_killed import DriverStopped
from chaos.scenarios.untethered_subscriber import UntetheredSubscriber
from chaos.scenarios.archive import (ArchiveControlClientAbandoned, ArchiveKilledMidRecording,
                                    ArchiveLiveTailReplay, ArchiveReplicationSourceKilled, ArchiveSegmentByteFlipped,
                                    ArchiveStorageExhausted)
from chaos.scenarios.udp import (UdpFixedGap, UdpPartition, UdpRandomLoss, UdpReceiverDriverKilled,
                                 UdpSenderDriverKilled)

SCENARIOS = {s.name: s for s in (SubscriberKilled(), SharedPublisherKilled(), PublisherKilledMidClaim(),
                                 ClientPaused(), DriverKilled(), SlowConsumer(), GarbageWriter(),
                                 ExitWithoutClose(), SubscriberStalled(), DriverStopped(), HugeMessages(),
                                 LogByteCorrupted(), DiskFull(), UntetheredSubscriber(), UdpRandomLoss(),
                                 UdpFixedGap(), UdpPartition(), UdpReceiverDriverKilled(), UdpSenderDriverKilled(),
                                 ArchiveKilledMidRecording(), ArchiveStorageExhausted(),
                                 ArchiveControlClientAbandoned(), ArchiveLiveTailReplay(),
                                 ArchiveSegmentByteFlipped(), ArchiveReplicationSourceKilled())}
