"""A publication's settings from its channel URI, validated against the driver's context (Aeron's
``PublicationParams``): term length, MTU, linger, window, session id and an exclusive publication's start position,
and the publication tag of ``tags=<channel tag>,<publication tag>``.

``session-id=tag:<n>`` takes the session id of the network publication tagged ``<n>``, and its term length and MTU
unless the channel names its own (the C driver's rule: so a second publication joins the tagged one's session,
e.g. on another endpoint, with a log the same shape).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from aeron_numba.codecs import channel_uri as cu
from aeron_numba.errors import ChannelParameterError
from aeron_numba.layout import frame
from aeron_numba.layout import log_buffer_descriptor as lb

from aeron_numba.driver.context import DriverContext
from aeron_numba.driver import uri_params as up
from aeron_numba.driver.ipc_publication import IpcPublication

if TYPE_CHECKING:
    from aeron_numba.driver.network_publication import NetworkPublication


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
    spies_simulate_connection: bool = False
    entity_tag: int | None = None  # the publication tag of tags=
    has_term_length: bool = False  # named on the channel: only what it names must match a log it joins
    has_mtu_length: bool = False
    signal_eos: bool = True  # eos=false: closing sends no end of stream (a replay a live stream takes over from)

    @classmethod
    def from_uri(cls, uri: cu.ChannelUri, ctx: DriverContext, exclusive: bool, network: bool = False,
                 find_publication_by_tag=lambda tag: None) -> "PublicationParams":
        """Aeron's order of checks and its refusals (``uri_params``: GENERIC_ERROR, as the C driver).
        ``find_publication_by_tag(tag)`` is the driver's network publication with that publication tag, or None."""
        term_length = ctx.term_buffer_length if network else ctx.ipc_term_buffer_length
        mtu = ctx.mtu_length if network else ctx.ipc_mtu_length
        session_id_text = uri.get(cu.SESSION_ID_PARAM)
        if session_id_text is not None and session_id_text.startswith(cu.TAG_PREFIX):
            tagged = find_publication_by_tag(up.int64_text(cu.SESSION_ID_PARAM, session_id_text,
                                                           session_id_text[len(cu.TAG_PREFIX):]))
            if tagged is None:
                raise ChannelParameterError(
                    f"{cu.SESSION_ID_PARAM}={session_id_text} must reference a network publication")
            session_id, term_length, mtu = tagged.session_id, tagged.term_length, tagged.mtu
        else:
            session_id = up.int32_param(uri, cu.SESSION_ID_PARAM)
        entity_tag = None
        if uri.entity_tag is not None:
            try:
                entity_tag = up.int64_text(cu.TAGS_PARAM, uri.entity_tag, uri.entity_tag, base=10)
            except ChannelParameterError:
                raise ChannelParameterError(f"Entity tag invalid: {uri.entity_tag}") from None
        linger = up.duration_param(uri, cu.LINGER_PARAM)
        linger = ctx.publication_linger_timeout_ns if linger is None else linger
        given_term_length = up.size_param(uri, cu.TERM_LENGTH_PARAM)
        if given_term_length is not None:
            up.check_term_length(given_term_length)
            term_length = given_term_length
        given_mtu = up.size_param(uri, cu.MTU_LENGTH_PARAM)
        if given_mtu is not None:
            up.check_mtu_length(given_mtu)
            mtu = given_mtu
        window = up.size_param(uri, cu.PUBLICATION_WINDOW_PARAM)
        if window is None:  # the context's window, when set and under half the term (Aeron's producer window)
            window = ctx.publication_term_window_length if network else ctx.ipc_publication_term_window_length
            window = window if 0 < window < term_length // 2 else term_length // 2
        else:
            up.check_publication_window_length(window, mtu, term_length)
        params = cls(term_length, mtu, linger, window, session_id, entity_tag=entity_tag,
                     has_term_length=cu.TERM_LENGTH_PARAM in uri.params,
                     has_mtu_length=cu.MTU_LENGTH_PARAM in uri.params)
        names = (cu.INITIAL_TERM_ID_PARAM, cu.TERM_ID_PARAM, cu.TERM_OFFSET_PARAM)
        initial_term_id, term_id = up.int32_param(uri, names[0]), up.int32_param(uri, names[1])
        term_offset_text = uri.get(names[2])
        given = sum(value is not None for value in (initial_term_id, term_id, term_offset_text))
        if given:
            if given < 3:
                raise ChannelParameterError(f"params: {' '.join(names)} must be used as a complete set")
            if not term_offset_text.isdigit():
                raise ChannelParameterError(f"could not parse {names[2]}={term_offset_text} in URI")
            term_offset = int(term_offset_text)
            if ((term_id - initial_term_id + 2**31) % 2**32) - 2**31 < 0:
                # C names term-offset where it prints the term id: quoted as Aeron writes it.
                raise ChannelParameterError(f"Param difference greater than 2^31 - 1: {names[0]}={initial_term_id}"
                                            f" {names[2]}={term_id}")
            if term_offset > term_length:
                raise ChannelParameterError(
                    f"Param {names[2]}={term_offset} > {cu.TERM_LENGTH_PARAM}={term_length}")
            if term_offset % frame.FRAME_ALIGNMENT:
                raise ChannelParameterError(f"Param {names[2]}={term_offset} must be multiple of FRAME_ALIGNMENT")
            params.initial_term_id, params.term_id, params.term_offset = initial_term_id, term_id, term_offset
        up.check_publication_flags(uri)
        params.spies_simulate_connection = up.bool_param(uri, cu.SPIES_SIMULATE_CONNECTION_PARAM,
                                                         ctx.spies_simulate_connection)
        params.signal_eos = up.bool_param(uri, cu.EOS_PARAM, True)
        return params

    @property
    def log_entity_tag(self) -> int:
        """The entity tag the log's metadata holds: the publication tag, or Aeron's invalid tag (-1) as C writes."""
        return lb.INVALID_TAG if self.entity_tag is None else self.entity_tag

    @property
    def has_position(self) -> bool:
        return self.initial_term_id is not None

    def existing_publication(self, shared, session_ids_in_use: set[int], exclusive: bool, channel: str,
                             stream_id: int, *, network: bool = False):
        """The publication a new one joins (None: make one), by Aeron's rule: a concurrent publication joins
        ``shared`` (the stream's active concurrent one) if what it names matches; a session id in use on the
        stream (the endpoint's, for a network publication) is refused but to one joining the concurrent
        publication that has it."""
        if self.session_id is not None and self.session_id in session_ids_in_use and (exclusive or shared is None):
            raise ChannelParameterError(
                f"Specified session-id is already in exclusive use for channel={channel} stream-id={stream_id}")
        if exclusive or shared is None:
            return None
        if network and shared.spies_simulate_connection != self.spies_simulate_connection:
            raise ChannelParameterError("existing publication has different spies simulate connection: requested="
                                        f"{'true' if self.spies_simulate_connection else 'false'}")
        self.check_matches(shared)
        return shared

    def check_matches(self, publication: IpcPublication | NetworkPublication) -> None:
        """A concurrent publication joining an existing log must not ask for other log settings than it has (Aeron's
        check and words, GENERIC_ERROR); what it does not name is not compared."""
        log = publication.log
        for name, named, requested, existing in (
                (cu.SESSION_ID_PARAM, self.session_id is not None, self.session_id, publication.session_id),
                (cu.MTU_LENGTH_PARAM, self.has_mtu_length, self.mtu_length, log.mtu_length),
                (cu.TERM_LENGTH_PARAM, self.has_term_length, self.term_length, log.term_length)):
            if named and requested != existing:
                raise ChannelParameterError(
                    f"existing publication has different '{name}': existing={existing} requested={requested}")
        if not self.has_position:
            return
        if self.initial_term_id != log.initial_term_id:
            raise ChannelParameterError(f"existing publication has different '{cu.INITIAL_TERM_ID_PARAM}':"
                                        f" existing={log.initial_term_id} requested={self.initial_term_id}")
        bits, start = log.position_bits_to_shift, publication.start_position
        if (_wrap_i32(self.term_id - self.initial_term_id) << bits) + self.term_offset == start:
            return
        existing_term_id = _wrap_i32(log.initial_term_id + (start >> bits))
        if self.term_id != existing_term_id:
            name, requested, existing = cu.TERM_ID_PARAM, self.term_id, existing_term_id
        else:
            name, requested, existing = cu.TERM_OFFSET_PARAM, self.term_offset, start & (log.term_length - 1)
        raise ChannelParameterError(
            f"existing publication has different '{name}': existing={existing} requested={requested}")


def _wrap_i32(value: int) -> int:
    return ((value + 2**31) % 2**32) - 2**31
