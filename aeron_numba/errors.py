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
