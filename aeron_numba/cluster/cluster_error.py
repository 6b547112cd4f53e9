"""The cluster's errors: ``ClusterError`` for a rule of the cluster broken (an unknown term, a duplicate term
entry), ``ClusterFileError`` for a cluster file whose bytes cannot be what Aeron wrote (it names the file, the
offset and the limit, so a user can find the damage)."""

from __future__ import annotations

import os

from aeron_numba.errors import AeronError, LayoutError


class ClusterError(AeronError):
    """A request the cluster's rules refuse (Aeron's ``ClusterException``)."""


class ClusterFileError(ClusterError, LayoutError):
    """A cluster file is missing, truncated or holds a value no writer produces."""

    def __init__(self, path: str | os.PathLike, message: str, offset: int | None = None, limit: int | None = None):
        where = f" at offset {offset}" if offset is not None else ""
        super().__init__(f"{os.fspath(path)}{where}: {message}")
        self.path = os.fspath(path)
        self.offset = offset
        self.limit = limit


class ClusterEvent(ClusterError):
    """Something another member did means this election must start again (Aeron's ``ClusterEvent``: a new leader
    detected, a potential new election, our log truncated to the leader's)."""


class ClusterTimeoutError(ClusterError):
    """An election stage ran past its deadline (Aeron's ``TimeoutException`` in the cluster)."""
