"""ArchiveContext's settings (recording events, the conductor cycle threshold): Aeron's names and defaults, and
what conclude() refuses."""

from __future__ import annotations

import pytest

from aeron_numba.archive.context import ArchiveContext
from aeron_numba.errors import ConfigurationError
from aeron_numba.layout import archive as A


def test_recording_events_are_off_by_default_on_stream_30_with_no_channel(tmp_path):
    ctx = ArchiveContext.from_env({}, archive_dir=str(tmp_path)).conclude()
    assert (ctx.recording_events_enabled, ctx.recording_events_channel, ctx.recording_events_stream_id) == \
        (False, "", 30)


def test_recording_events_settings_from_aeron_environment_variables(tmp_path):
    ctx = ArchiveContext.from_env({"AERON_ARCHIVE_RECORDING_EVENTS_ENABLED": "true",
                                   "AERON_ARCHIVE_RECORDING_EVENTS_CHANNEL": "aeron:ipc?term-length=64k",
                                   "AERON_ARCHIVE_RECORDING_EVENTS_STREAM_ID": "33"},
                                  archive_dir=str(tmp_path)).conclude()
    assert (ctx.recording_events_enabled, ctx.recording_events_channel, ctx.recording_events_stream_id) == \
        (True, "aeron:ipc?term-length=64k", 33)


@pytest.mark.parametrize("channel, message", [
    ("", "recording_events_channel must be set when recording_events_enabled is true: use aeron:ipc"),
    (A.DEFAULT_RECORDING_EVENTS_CHANNEL, "recording_events_channel='aeron:udp?control-mode=dynamic|"
                                         "control=localhost:8030': control-mode=dynamic"),
    ("udp:nothing", "must start with 'aeron:'"),
])
def test_enabled_recording_events_need_a_channel_this_driver_serves(tmp_path, channel, message):
    with pytest.raises(ConfigurationError) as error:
        ArchiveContext(archive_dir=str(tmp_path), recording_events_enabled=True,
                       recording_events_channel=channel).conclude()
    assert message in str(error.value)
    ArchiveContext(archive_dir=str(tmp_path), recording_events_channel=channel).conclude()  # disabled: unused


def test_an_events_flag_that_is_not_a_boolean_is_refused():
    with pytest.raises(ConfigurationError, match="AERON_ARCHIVE_RECORDING_EVENTS_ENABLED='maybe' must be true or"):
        ArchiveContext.from_env({"AERON_ARCHIVE_RECORDING_EVENTS_ENABLED": "maybe"})


def test_the_conductor_cycle_threshold_is_one_second_unless_set_and_must_be_positive(tmp_path):
    assert ArchiveContext.from_env({}, archive_dir=str(tmp_path)).conclude().conductor_cycle_threshold_ns == \
        1_000_000_000
    ctx = ArchiveContext.from_env({"AERON_ARCHIVE_CONDUCTOR_CYCLE_THRESHOLD": "5ms"}, archive_dir=str(tmp_path))
    assert ctx.conclude().conductor_cycle_threshold_ns == 5_000_000
    with pytest.raises(ConfigurationError, match="conductor_cycle_threshold_ns=0 must be > 0"):
        ArchiveContext(archive_dir=str(tmp_path), conductor_cycle_threshold_ns=0).conclude()
