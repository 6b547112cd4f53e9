"""What a user running an archive with -v (or AERON_LOG_LEVEL=INFO) sees on the ``aeron_numba.archive`` logger:
control sessions, recordings started and stopped, errors (which also stay in the mark file's error log)."""

from __future__ import annotations

import logging

from tests.unit.archive.test_archive_conductor import conductor, record  # noqa: F401  (the fixture)


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "aeron_numba.archive"]


def test_sessions_and_recordings_are_logged_as_they_start_and_stop(conductor, shm_dir, caplog):  # noqa: F811
    caplog.set_level(logging.INFO, logger="aeron_numba.archive")
    image, recording_id = record(conductor, shm_dir)
    [session] = conductor.control_sessions.values()
    conductor.on_stop_recording_by_identity_request(session, correlation_id=21, recording_id=recording_id)
    conductor.do_work()
    conductor.on_close_session_request(session)
    conductor.do_work()
    sid = session.control_session_id
    assert _messages(caplog) == [
        f"control session {sid} connecting (response channel aeron:ipc stream 20)",
        f"recording {recording_id} started: aeron:ipc?term-length=64k|alias=x stream 1001 session "
        f"{image.session_id} from position {image.join_position}",
        f"recording {recording_id} stopped at position {image.join_position}",
        f"control session {sid} closed",
    ]


def test_an_error_is_logged_as_a_warning_as_well_as_recorded(conductor, caplog):  # noqa: F811
    caplog.set_level(logging.WARNING, logger="aeron_numba.archive")
    conductor.record_error("segment file 7-0.rec: no space left")
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "error recorded in the error log: segment file 7-0.rec: no space left")]
