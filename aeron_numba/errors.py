"""Exceptions shared by every layer. Each names the bad value and the limit it broke."""


class AeronError(Exception):
    """Base of every aeron-numba error."""


class ConfigurationError(AeronError, ValueError):
    """A length, size or setting is outside what the format or Aeron allows (raised before any file is touched)."""


class LayoutError(AeronError, ValueError):
    """A mapped file or buffer does not have the layout the spec requires (wrong length, version, alignment)."""


class CountersFullError(AeronError):
    """Counter ``allocate`` found no UNUSED id and no RECLAIMED id past its reuse deadline."""


class CounterStateError(AeronError, ValueError):
    """An operation needs an ALLOCATED counter and the record is in another state."""


class InvalidChannelError(ConfigurationError):
    """A channel URI does not follow spec/transport.md §12 (the driver answers INVALID_CHANNEL)."""


class ChannelParameterError(InvalidChannelError):
    """A channel parameter's value is refused: a number that does not parse, a term length, MTU, port or start
    position out of range. Aeron's C driver answers these GENERIC_ERROR (its EINVAL), keeping INVALID_CHANNEL
    for a malformed URI, and so does ours."""


class UnknownHostError(InvalidChannelError):
    """A channel names a host that does not resolve (the driver answers UNKNOWN_HOST, as Aeron's C driver)."""


class InsufficientStorageError(AeronError):
    """A file system has less usable room than the files a process must create there (Aeron's storage check:
    "insufficient usable storage ..."). Free some space or choose a larger file system."""


# ------------------------------------------------------------------------------------------------ client


class DriverTimeoutError(AeronError):
    """The media driver did not answer in time: no ``cnc.dat``, no heartbeat, or no response to a command
    within ``driver_timeout_ms``. Start a driver on the same aeron dir, or raise the timeout."""


class ClientTimeoutError(AeronError):
    """The driver timed this client out (ON_CLIENT_TIMEOUT): its keepalives stopped for longer than the
    driver's client liveness timeout, and the driver freed its resources. Connect a new client."""


class ConductorServiceTimeoutError(AeronError):
    """The client conductor was not serviced within the client liveness timeout (the process stalled),
    so the driver will have timed the client out: the client closed itself."""


class ClientClosedError(AeronError):
    """An operation was attempted on an ``Aeron`` client (or a resource of it) that is already closed."""


class RegistrationError(AeronError):
    """The driver answered a command with ON_ERROR (spec/transport.md §11.4).

    ``error_code`` is the §11.4 code (``layout.control_protocol``), ``error_code_name`` its name.
    """

    def __init__(self, error_code: int, message: str):
        from aeron_numba.layout.control_protocol import ERROR_CODE_NAMES

        self.error_code = int(error_code)
        self.error_code_name = ERROR_CODE_NAMES.get(self.error_code, "UNKNOWN_CODE_VALUE")
        self.driver_message = message
        super().__init__(f"{self.error_code_name} (error_code={self.error_code}): {message}")

    def __reduce__(self):
        return (type(self), (self.error_code, self.driver_message))


class MessageTooLongError(AeronError, ValueError):
    """An ``offer`` longer than the publication's max message length, or a ``try_claim`` longer than its
    max payload length (Aeron throws; the C API returns ERROR)."""
