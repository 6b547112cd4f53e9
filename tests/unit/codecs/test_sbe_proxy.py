"""``SbeProxy`` and the generated archive proxies: every send method's bytes are the codec's encoding of the
fields sent (so the wire is what ``SbeCodec.encode`` always made), back pressure is retried a bounded number of
times and reported, the buffer is reused, and the checked-in generated module is what the generator makes."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import numpy as np
import pytest

from aeron_numba.codecs import archive_proxies
from aeron_numba.codecs.archive_messages import ARCHIVE, CONTROL_REQUESTS, CONTROL_RESPONSES, RECORDING_EVENTS
from aeron_numba.codecs.sbe import MalformedMessageError
from aeron_numba.codecs.sbe_adapter import handler_name
from aeron_numba.codecs.sbe_proxy import SbeProxy
from aeron_numba.layout import sbe as L
from aeron_numba.layout.publication_status import ADMIN_ACTION, BACK_PRESSURED, NOT_CONNECTED

ROOT = Path(__file__).resolve().parents[3]


class Publication:
    """Takes offers (a copy of each) after answering ``refusals`` first."""

    def __init__(self, *refusals):
        self.refusals = list(refusals)
        self.offers = 0
        self.sent: list[bytes] = []

    def offer(self, buffer, offset=0, length=None):
        self.offers += 1
        if self.refusals:
            return self.refusals.pop(0)
        self.sent.append(bytes(buffer[offset:offset + length]))
        return 64 * len(self.sent)


def _values(message):
    """Distinct in-range values for every field of ``message`` (min/max of each primitive alternate)."""
    values = {}
    for i, f in enumerate(message.fields):
        fmt, size, _ = L.PRIMITIVES[f.primitive]
        low, high = (0, (1 << 8 * size) - 1) if fmt.isupper() else (-(1 << 8 * size - 1), (1 << 8 * size - 1) - 1)
        values[f.name] = (high - i) if i % 2 else (low + i)
    for v in message.var_fields:
        values[v.name] = f"{v.name}:aeron:ipc" if v.kind == L.VAR_ASCII else bytes(range(len(v.name)))
    return values


@pytest.mark.parametrize("proxy_class, sends", [
    (archive_proxies.ArchiveProxy, CONTROL_REQUESTS),
    (archive_proxies.ControlResponseProxyBase, CONTROL_RESPONSES),
    (archive_proxies.RecordingEventsProxy, RECORDING_EVENTS),
])
def test_every_send_method_sends_the_codec_encoding_of_its_explicit_fields(proxy_class, sends):
    publication = Publication()
    proxy = proxy_class(publication)
    buffer = proxy.buffer
    for name in sends:
        message = ARCHIVE.schema.message(name)
        method = getattr(proxy, handler_name(name)[3:])
        parameters = list(inspect.signature(method).parameters)
        assert parameters == [f.name for f in message.fields] + [v.name for v in message.var_fields], name
        values = _values(message)
        assert method(**values) is True and proxy.last_result > 0
        sent = publication.sent[-1]
        decoded = ARCHIVE.decode(sent)
        assert type(decoded).__name__ == name and decoded.__dict__ == values
        assert sent == ARCHIVE.encode(getattr(ARCHIVE, name)(**values))  # the bytes encode() always made
    assert proxy.buffer is buffer  # reused, not one per message
    assert len(publication.sent) == len(sends)


def test_back_pressure_is_retried_a_bounded_number_of_times_then_reported():
    publication = Publication(BACK_PRESSURED, ADMIN_ACTION)
    proxy = archive_proxies.ArchiveProxy(publication)
    assert proxy.keep_alive_request(control_session_id=1, correlation_id=2)  # the third offer is taken
    assert publication.offers == 3
    publication = Publication(*[BACK_PRESSURED] * 5)
    proxy = archive_proxies.ArchiveProxy(publication)
    assert not proxy.keep_alive_request(control_session_id=1, correlation_id=2)
    assert (publication.offers, proxy.last_result) == (3, BACK_PRESSURED)
    publication = Publication(*[BACK_PRESSURED] * 5)
    proxy = archive_proxies.ArchiveProxy(publication, retry_attempts=1)
    assert not proxy.keep_alive_request(control_session_id=1, correlation_id=2)
    assert (publication.offers, proxy.last_result) == (1, BACK_PRESSURED)
    publication = Publication(NOT_CONNECTED)
    proxy = archive_proxies.ArchiveProxy(publication)
    assert not proxy.keep_alive_request(control_session_id=1, correlation_id=2)  # not retried: the caller decides
    assert (publication.offers, proxy.last_result) == (1, NOT_CONNECTED)
    with pytest.raises(ValueError, match="retry_attempts=0 < 1"):
        SbeProxy(ARCHIVE, publication, retry_attempts=0)


def test_a_message_longer_than_the_buffer_grows_it_once():
    publication = Publication()
    proxy = archive_proxies.ArchiveProxy(publication, initial_capacity=64)
    channel = "aeron:udp?endpoint=localhost:40123|" + "x" * 3000
    assert proxy.start_recording_request(control_session_id=1, correlation_id=2, stream_id=3, source_location=0,
                                         channel=channel)
    assert proxy.buffer.size == 4096 and ARCHIVE.decode(publication.sent[0]).channel == channel


def test_encode_into_writes_in_place_and_refuses_a_buffer_too_small_naming_the_lengths():
    message = ARCHIVE.ControlResponse(control_session_id=1, correlation_id=2, error_message="no such recording")
    buffer = np.zeros(256, dtype=np.uint8)
    length = ARCHIVE.encode_into(buffer, 10, message)
    assert length == ARCHIVE.encoded_length(message) == 8 + 32 + 4 + 17
    assert bytes(buffer[10:10 + length]) == ARCHIVE.encode(message)
    with pytest.raises(MalformedMessageError, match="error_message: length=17 at 40 past a buffer of 60 bytes"):
        ARCHIVE.encode_into(bytearray(60), 0, message)
    with pytest.raises(MalformedMessageError, match="header at offset 55 past a buffer of 60 bytes"):
        ARCHIVE.encode_into(bytearray(60), 55, message)


def test_the_generated_proxy_modules_are_what_the_generator_makes():
    spec = importlib.util.spec_from_file_location("generate_sbe_schemas", ROOT / "scripts" / "generate_sbe_schemas.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    generated = generator.generated_proxies()
    assert generated, "the generator makes no proxy module"
    for path, text in generated.items():
        assert path.read_text() == text, f"{path.name} differs from the generator's: run " \
                                         "python scripts/generate_sbe_schemas.py --proxies-only"
        assert text.startswith('"""AUTOGENERATED')
