"""How a failed client command is answered: the exception a decision raises and the §11.4 code ON_ERROR carries.

Shared by the command adapter (which answers every failure) and the conductor (which refuses commands).
"""

from __future__ import annotations

import errno

from aeron_numba.errors import (AeronError, ChannelParameterError, ConfigurationError, CountersFullError,
                                UnknownHostError)
from aeron_numba.layout import control_protocol as cp

from aeron_numba.driver.network_conductor import ChannelEndpointError


class ControlProtocolError(AeronError):
    """A command the driver refuses; carries the §11.4 error code sent back with ON_ERROR."""

    def __init__(self, error_code: int, message: str):
        super().__init__(message)
        self.error_code = error_code


def error_code_of(exc: Exception) -> int:
    """The §11.4 code a client gets for a failed command."""
    if isinstance(exc, ControlProtocolError):
        return exc.error_code
    if isinstance(exc, ChannelParameterError):  # a value Aeron's C driver refuses with EINVAL
        return cp.GENERIC_ERROR
    if isinstance(exc, UnknownHostError):
        return cp.UNKNOWN_HOST
    if isinstance(exc, ConfigurationError):  # a malformed channel URI
        return cp.INVALID_CHANNEL
    if isinstance(exc, CountersFullError):  # Aeron's C driver: ENOMEM, "Max counter id (N) exceeded"
        return cp.GENERIC_ERROR
    if isinstance(exc, ChannelEndpointError):  # a socket that cannot be bound: GENERIC_ERROR from C and Java too
        return cp.GENERIC_ERROR
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:  # a log buffer file the disk cannot hold
        return cp.STORAGE_SPACE
    return cp.GENERIC_ERROR
