"""Aeron client: Aeron, Context, Publication, Subscription, Image, counters and the cnc.dat mapping.

Public names are importable from here; ``aeron_numba/__init__.py`` re-exports them.
"""

from aeron_numba.client.aeron import Aeron
from aeron_numba.client.buffer_claim import BufferClaim
from aeron_numba.client.context import Context
from aeron_numba.client.counter import Counter
from aeron_numba.client.fragment_assembler import (
    ABORT,
    BREAK,
    COMMIT,
    CONTINUE,
    ControlledFragmentAction,
    ControlledFragmentAssembler,
    FragmentAssembler,
)
from aeron_numba.client.header import Header
from aeron_numba.client.image import Image
from aeron_numba.client.publication import ExclusivePublication, Publication, status_name
from aeron_numba.client.subscription import Subscription
from aeron_numba.errors import (
    AeronError,
    ClientClosedError,
    ClientTimeoutError,
    ConductorServiceTimeoutError,
    ConfigurationError,
    DriverTimeoutError,
    InvalidChannelError,
    MessageTooLongError,
    RegistrationError,
)
from aeron_numba.kernels.counters import CountersReader
from aeron_numba.layout.publication_status import (
    ADMIN_ACTION,
    BACK_PRESSURED,
    CLOSED,
    MAX_POSITION_EXCEEDED,
    NOT_CONNECTED,
)

__all__ = [
    "Aeron",
    "Context",
    "Publication",
    "ExclusivePublication",
    "Subscription",
    "Image",
    "Header",
    "FragmentAssembler",
    "ControlledFragmentAssembler",
    "ControlledFragmentAction",
    "ABORT",
    "BREAK",
    "COMMIT",
    "CONTINUE",
    "BufferClaim",
    "Counter",
    "CountersReader",
    "NOT_CONNECTED",
    "BACK_PRESSURED",
    "ADMIN_ACTION",
    "CLOSED",
    "MAX_POSITION_EXCEEDED",
    "status_name",
    "AeronError",
    "ConfigurationError",
    "InvalidChannelError",
    "DriverTimeoutError",
    "ClientTimeoutError",
    "ClientClosedError",
    "ConductorServiceTimeoutError",
    "RegistrationError",
    "MessageTooLongError",
]
