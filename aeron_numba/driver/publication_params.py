"""A publication's settings from its channel URI, validated against the driver's context (Aeron's
``PublicationParams``): term length, MTU, linger, window, session id and an exclusive publication's start position.
"""

from __future__ import annotations

from dataclasses import dataclass

from aeron_numba.codecs import channel_uri as cu
from aeron_numba.errors import InvalidChannelError
from aeron_numba.layout import frame
from aeron_numba.layout import log_buffer_descriptor as lb

from aeron_numba.driver.context import DriverContext
from aeron_numba.driver.ipc_publication import IpcPublication


@dataclass
class PublicationParams:
    """Publication settings from the channel URI, validated (term length, mtu, session id, start position)."""

    term_length: int
    mtu_length: int
    linger_ns: int
    term_window_length: int
    session_id: int | None = None
    initial_term_id: int | None = None
    term_id: int | None = None
    term_offset: int = 0

    @classmethod
    def from_uri(cls, uri: cu.ChannelUri, ctx: DriverContext, exclusive: bool,
                 network: bool = False) -> "PublicationParams":
        term_length = ctx.term_buffer_length if network else ctx.ipc_term_buffer_length
        if uri.get(cu.TERM_LENGTH_PARAM):
            term_length = cu.parse_size(cu.TERM_LENGTH_PARAM, uri.get(cu.TERM_LENGTH_PARAM))
        lb.check_term_length(term_length)
        mtu = ctx.mtu_length if network else ctx.ipc_mtu_length
        if uri.get(cu.MTU_LENGTH_PARAM):
            mtu = cu.parse_size(cu.MTU_LENGTH_PARAM, uri.get(cu.MTU_LENGTH_PARAM))
        frame.check_mtu_length(mtu)
        linger = ctx.publication_linger_timeout_ns
        if uri.get(cu.LINGER_PARAM):
            linger = cu.parse_duration_ns(cu.LINGER_PARAM, uri.get(cu.LINGER_PARAM))
        window = ctx.publication_term_window_length if network else ctx.ipc_publication_term_window_length
        if uri.get(cu.PUBLICATION_WINDOW_PARAM):
            window = cu.parse_size(cu.PUBLICATION_WINDOW_PARAM, uri.get(cu.PUBLICATION_WINDOW_PARAM))
        window = window if 0 < window < term_length // 2 else term_length // 2
        params = cls(term_length, mtu, linger, window)
        if uri.get(cu.SESSION_ID_PARAM):
            params.session_id = cu.parse_int32(cu.SESSION_ID_PARAM, uri.get(cu.SESSION_ID_PARAM))
        position_params = [uri.get(p) for p in (cu.INITIAL_TERM_ID_PARAM, cu.TERM_ID_PARAM, cu.TERM_OFFSET_PARAM)]
        if any(p is not None for p in position_params):
            if not exclusive:
                raise InvalidChannelError(
                    f"channel '{uri}': init-term-id, term-id and term-offset are only for exclusive publications"
                )
            if not all(p is not None for p in position_params):
                raise InvalidChannelError(f"channel '{uri}': init-term-id, term-id and term-offset must be given together")
            params.initial_term_id = cu.parse_int32(cu.INITIAL_TERM_ID_PARAM, position_params[0])
            params.term_id = cu.parse_int32(cu.TERM_ID_PARAM, position_params[1])
            params.term_offset = cu.parse_int32(cu.TERM_OFFSET_PARAM, position_params[2])
            if not 0 <= params.term_offset <= term_length or params.term_offset % frame.FRAME_ALIGNMENT:
                raise InvalidChannelError(
                    f"term-offset={params.term_offset} must be in [0, term-length={term_length}] and a multiple of"
                    f" {frame.FRAME_ALIGNMENT}"
                )
            term_count = ((params.term_id - params.initial_term_id + 2**31) % 2**32) - 2**31
            if term_count < 0:
                raise InvalidChannelError(
                    f"term-id={params.term_id} is before init-term-id={params.initial_term_id}"
                )
        return params

    def check_matches(self, publication: IpcPublication) -> None:
        """A concurrent publication joining an existing log must not ask for different log settings."""
        if self.term_length != publication.log.term_length:
            raise InvalidChannelError(
                f"term-length={self.term_length} does not match existing publication's"
                f" term-length={publication.log.term_length}"
            )
        if self.mtu_length != publication.log.mtu_length:
            raise InvalidChannelError(
                f"mtu={self.mtu_length} does not match existing publication's mtu={publication.log.mtu_length}"
            )

