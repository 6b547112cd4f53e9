"""aeron-stat, aeron-error-stat, aeron-loss-stat and the aeron dir rule, over real files in /dev/shm.

The driver's side is played by the real writers: ``CncFile.create``, ``CountersManager`` (system counters and
stream counters from the §9.4 key/label builders), ``DistinctErrorLog`` and ``LossReport``. Output is
checked line by line in UTC; the console entry points run once as subprocesses.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import tomllib
from datetime import timedelta, timezone
from importlib import import_module
from pathlib import Path

import numpy as np
import pytest

from aeron_numba import aeron_dir
from aeron_numba.kernels.cnc_file import CncFile
from aeron_numba.kernels.atomics_for_python import put_int32_release
from aeron_numba.kernels.counters import (
    CountersManager,
    CountersReader,
    channel_status_key,
    channel_status_label,
    heartbeat_counter_key,
    heartbeat_counter_label,
    stream_counter_key,
    stream_counter_label,
    subscriber_position_label,
)
from aeron_numba.kernels.error_log import DistinctErrorLog, ErrorLogReader
from aeron_numba.kernels.loss_report import LossReport, LossReportReader
from aeron_numba.kernels.ring_buffer import set_consumer_heartbeat_time
from aeron_numba.layout import cnc, counters, loss_report, ring_buffer
from aeron_numba.layout.bits import semantic_version
from aeron_numba.layout.mapped_file import MappedFile
from aeron_numba.tools import _common, aeron_stat, error_stat, loss_stat

UTC = timezone.utc
NOW_MS = 1_738_591_506_789  # 2025-02-03 14:05:06.789 UTC
NOW_TEXT = "2025-02-03 14:05:06.789+0000"
DRIVER_PID = 4242
HEARTBEAT_AGE_MS = 42
RING_CAPACITY = 1024
VERSION_SUFFIX = ": version=1.48.0 commit=deadbeef"
UDP = "aeron:udp?endpoint=localhost:20121"
MDC = "aeron:udp?endpoint=224.0.1.1:40456|interface=localhost"

# Rows expected after the 40 system counters (id 42 is freed, so it is skipped).
STREAM_ROWS = [
    " 40:               65,536 - pub-lmt: 5 1234 1001 aeron:ipc ",  # aeronmd's trailing space
    " 41:                4,096 - sub-pos: 7 1234 1001 aeron:ipc @0",
    " 43:                    1 - snd-channel: aeron:udp?endpoint=localhost:20121 127.0.0.1:54321",
    " 44:    1,738,591,506,779 - client-heartbeat: id=99",
    " 45:       -9,876,543,210 - custom counter",
]
SYSTEM_VALUES = {0: ("123,456,789", ""), 1: ("1,000", ""), 15: ("3", VERSION_SUFFIX), 34: ("77,824", VERSION_SUFFIX)}


def system_rows() -> list[str]:
    rows = []
    for system_id, label in counters.SYSTEM_COUNTERS:
        value, suffix = SYSTEM_VALUES.get(system_id, ("0", ""))
        rows.append(str(system_id).rjust(3) + ": " + value.rjust(20) + " - " + label + suffix)
    return rows


def _write_driver_files(directory: Path) -> None:
    """What a driver leaves in its directory: cnc.dat (counters, heartbeat, errors) and loss-report.dat."""
    cnc_file = CncFile.create(
        directory / cnc.CNC_FILE,
        to_driver_buffer_length=RING_CAPACITY + ring_buffer.TRAILER_LENGTH,
        to_clients_buffer_length=1024 + 128,
        counters_values_buffer_length=counters.COUNTER_LENGTH * 64,
        error_log_buffer_length=4096,
        start_timestamp_ms=NOW_MS - 60_000,
        pid=DRIVER_PID,
    )
    manager = CountersManager(
        cnc_file.counters_metadata_buffer, cnc_file.counters_values_buffer, epoch_clock=lambda: NOW_MS
    )
    manager.allocate_system_counters({15: VERSION_SUFFIX, 34: VERSION_SUFFIX})
    for counter_id, value in ((0, 123_456_789), (1, 1000), (15, 3), (34, semantic_version(1, 48, 0))):
        manager.set_counter_value(counter_id, value)
    allocations = [
        (stream_counter_label("pub-lmt", 5, 1234, 1001, "aeron:ipc"), counters.PUBLISHER_LIMIT_TYPE_ID,
         stream_counter_key(5, 1234, 1001, "aeron:ipc"), 65536),
        (subscriber_position_label(7, 1234, 1001, "aeron:ipc", 0), counters.SUBSCRIBER_POSITION_TYPE_ID,
         stream_counter_key(7, 1234, 1001, "aeron:ipc"), 4096),
        (stream_counter_label("rcv-pos", 8, 77, 10, UDP), counters.RECEIVER_POSITION_TYPE_ID,
         stream_counter_key(8, 77, 10, UDP), 5),
        (channel_status_label("snd-channel", UDP, "127.0.0.1:54321"), counters.SEND_CHANNEL_STATUS_TYPE_ID,
         channel_status_key(UDP),
         counters.CHANNEL_STATUS_ACTIVE),
        (heartbeat_counter_label(99), counters.CLIENT_HEARTBEAT_TYPE_ID, heartbeat_counter_key(99), NOW_MS - 10),
        ("custom counter", 1001, b"", -9_876_543_210),
    ]
    for expected_id, (label, type_id, key, value) in enumerate(allocations, start=40):
        assert manager.allocate(label, type_id, key) == expected_id
        manager.set_counter_value(expected_id, value)
    manager.free(42)  # RECLAIMED: readers skip it
    set_consumer_heartbeat_time(cnc_file.to_driver_buffer, RING_CAPACITY, NOW_MS - HEARTBEAT_AGE_MS)

    clock = iter([NOW_MS, NOW_MS + 1000, NOW_MS + 1500, NOW_MS + 2000])
    errors = DistinctErrorLog(cnc_file.error_log_buffer, epoch_clock=lambda: next(clock))
    assert errors.record("first error")
    assert errors.record("first error")
    assert errors.record(ValueError("bad value"))  # never raised: no traceback lines
    assert errors.record("line one\nline two")
    del manager, errors
    cnc_file.close()

    with MappedFile.create(directory / loss_report.LOSS_REPORT_FILE, 4096) as mapped:
        report = LossReport(mapped.buffer)
        entry = report.create_entry(2048, NOW_MS, 1234, 1001, UDP, "127.0.0.1:40123")
        entry.record_observation(2048, NOW_MS + 212)
        report.create_entry(1408, NOW_MS + 5000, -5, 7, MDC, "192.168.0.2:1234")
        del report, entry


@pytest.fixture
def driver_dir(shm_dir):
    _write_driver_files(shm_dir)
    return shm_dir


ERROR_LINES = [
    "***",
    f"2 observations from {NOW_TEXT} to 2025-02-03 14:05:07.789+0000 for:",
    " first error",
    "***",
    "1 observations from 2025-02-03 14:05:08.289+0000 to 2025-02-03 14:05:08.289+0000 for:",
    " ValueError: bad value",
    "***",
    "1 observations from 2025-02-03 14:05:08.789+0000 to 2025-02-03 14:05:08.789+0000 for:",
    " line one",
    "line two",
    "",
    "3 distinct errors observed.",
]
LOSS_LINES = [
    "#OBSERVATION_COUNT, TOTAL_BYTES_LOST, FIRST_OBSERVATION, LAST_OBSERVATION, SESSION_ID, STREAM_ID, CHANNEL, SOURCE",
    f"2,4096,{NOW_TEXT},2025-02-03 14:05:07.001+0000,1234,1001,{UDP},127.0.0.1:40123",
    f"1,1408,2025-02-03 14:05:11.789+0000,2025-02-03 14:05:11.789+0000,-5,7,{MDC},192.168.0.2:1234",
    "2 entries read",
]


# --- aeron dir (§13) -------------------------------------------------------------------------------------


def test_aeron_dir_explicit_then_env_then_default():
    env = {"AERON_DIR": "/from/env", "USER": "alice"}
    assert aeron_dir.resolve_aeron_dir("/explicit", env) == Path("/explicit")
    assert aeron_dir.resolve_aeron_dir(Path("/explicit"), env) == Path("/explicit")
    assert aeron_dir.resolve_aeron_dir(None, env) == Path("/from/env")
    assert aeron_dir.resolve_aeron_dir("", env) == Path("/from/env")
    assert aeron_dir.resolve_aeron_dir(None, {"AERON_DIR": "", "USER": "alice"}) == aeron_dir.default_aeron_dir(
        {"USER": "alice"}
    )


def test_default_aeron_dir_is_dev_shm_on_linux_else_tempdir(monkeypatch, tmp_path):
    if sys.platform.startswith("linux") and Path("/dev/shm").is_dir():
        assert aeron_dir.default_aeron_dir({"USER": "alice"}) == Path("/dev/shm/aeron-alice")
    monkeypatch.setattr(aeron_dir.sys, "platform", "darwin")
    monkeypatch.setattr(aeron_dir.tempfile, "gettempdir", lambda: str(tmp_path))
    assert aeron_dir.default_aeron_dir({"USER": "bob"}) == tmp_path / "aeron-bob"


def test_user_name_falls_back_to_passwd_then_default(monkeypatch):
    import pwd

    try:
        expected = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:  # a container uid without a passwd entry
        expected = "default"
    assert aeron_dir.default_aeron_dir({}).name == f"aeron-{expected}"

    def no_entry(uid):
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    assert aeron_dir.default_aeron_dir({}).name == "aeron-default"
    assert aeron_dir.default_aeron_dir({"USER": ""}).name == "aeron-default"


# --- formatting ------------------------------------------------------------------------------------------


def test_aeron_date_format():
    assert _common.format_timestamp_ms(NOW_MS, UTC) == NOW_TEXT
    assert _common.format_timestamp_ms(0, UTC) == "1970-01-01 00:00:00.000+0000"
    assert _common.format_timestamp_ms(-1, UTC) == "1969-12-31 23:59:59.999+0000"
    india = timezone(timedelta(hours=5, minutes=30))
    assert _common.format_timestamp_ms(NOW_MS, india) == "2025-02-03 19:35:06.789+0530"
    assert _common.format_timestamp_ms(2**62, UTC) == str(2**62)  # garbage prints raw
    assert _common.format_time_of_day(NOW_MS, UTC) == "14:05:06"


def test_counter_row_format():
    assert aeron_stat.counter_line(0, 123_456_789, "Bytes sent") == "  0:          123,456,789 - Bytes sent"
    assert aeron_stat.counter_line(1234, -1, "x") == "1234:                   -1 - x"
    assert aeron_stat.counter_line(7, 2**63 - 1, "max") == "  7: 9,223,372,036,854,775,807 - max"


# --- aeron-stat ------------------------------------------------------------------------------------------


def _stat_lines(directory: Path, counter_filter=None) -> list[str]:
    cnc_file = CncFile.open(directory / cnc.CNC_FILE)
    reader = CountersReader(cnc_file.counters_metadata_buffer, cnc_file.counters_values_buffer)
    lines = aeron_stat.stat_lines(cnc_file, reader, NOW_MS, counter_filter, UTC)
    del reader
    cnc_file.close()
    return lines


def _heartbeat_age(header: str) -> int:
    match = re.fullmatch(r"\d\d:\d\d:\d\d - Aeron Stat \(CnC v0\.2\.0\), pid 4242, heartbeat age (\d+)ms", header)
    assert match, header
    return int(match.group(1))


def test_aeron_stat_screen(driver_dir):
    lines = _stat_lines(driver_dir)
    assert lines[0] == "14:05:06 - Aeron Stat (CnC v0.2.0), pid 4242, heartbeat age 42ms"
    assert lines[1] == "=" * 70
    assert lines[2:-1] == system_rows() + STREAM_ROWS
    assert lines[2] == "  0:          123,456,789 - Bytes sent"
    assert lines[-1] == "--"


def test_aeron_stat_filters(driver_dir):
    by_type = aeron_stat.CounterFilter(type_ids=frozenset({counters.PUBLISHER_LIMIT_TYPE_ID, counters.SUBSCRIBER_POSITION_TYPE_ID}))
    assert _stat_lines(driver_dir, by_type)[2:-1] == STREAM_ROWS[:2]
    by_label = aeron_stat.CounterFilter(label_pattern=re.compile(r"aeron:udp|^Errors"))
    assert _stat_lines(driver_dir, by_label)[2:-1] == [system_rows()[15], STREAM_ROWS[2]]
    both = aeron_stat.CounterFilter(frozenset({0}), re.compile("version="))
    assert _stat_lines(driver_dir, both)[2:-1] == [system_rows()[15], system_rows()[34]]
    assert _stat_lines(driver_dir, aeron_stat.CounterFilter(frozenset({555})))[2:-1] == []


def test_aeron_stat_main_once(driver_dir, capsys):
    before_ms = _common.epoch_ms()
    assert aeron_stat.main(["--dir", str(driver_dir), "--once", "--type", "1", "--type", "1001"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert _heartbeat_age(out[0]) >= before_ms - (NOW_MS - HEARTBEAT_AGE_MS)
    assert out[1:] == ["=" * 70, STREAM_ROWS[0], STREAM_ROWS[4], "--"]


def test_aeron_stat_refreshes_until_ctrl_c(driver_dir, capsys, monkeypatch):
    naps = []

    def fake_sleep(seconds):
        naps.append(seconds)
        if len(naps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(aeron_stat.time, "sleep", fake_sleep)
    assert aeron_stat.main(["--dir", str(driver_dir), "--delay", "0.25", "--label-regex", "^pub-lmt"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert naps == [0.25] * 3
    assert out.count(STREAM_ROWS[0]) == 3 and out.count("--") == 3


@pytest.mark.parametrize("argv, message", [(["--label-regex", "("], "--label-regex"), (["--delay", "0"], "must be > 0"),
                                           (["--type", "x"], "invalid int value")])
def test_aeron_stat_rejects_bad_options(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        aeron_stat.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


# --- cnc.dat problems ------------------------------------------------------------------------------------


def _run_stat_main(directory: Path, capsys, *extra: str) -> tuple[int, str]:
    code = aeron_stat.main(["--dir", str(directory), "--once", "--timeout", "0", *extra])
    return code, capsys.readouterr().err


def test_missing_dir_and_missing_cnc(shm_dir, capsys):
    code, err = _run_stat_main(shm_dir / "nope", capsys)
    assert code == 1 and err == f"aeron-stat: aeron directory {shm_dir / 'nope'} does not exist: is a media driver running? (use --dir or $AERON_DIR)\n"
    code, err = _run_stat_main(shm_dir, capsys)
    assert code == 1 and err == f"aeron-stat: {shm_dir / 'cnc.dat'} does not exist: no media driver has started in {shm_dir}\n"


def test_short_not_ready_and_wrong_version_cnc(shm_dir, capsys):
    path = shm_dir / cnc.CNC_FILE
    path.write_bytes(bytes(64))
    code, err = _run_stat_main(shm_dir, capsys)
    assert code == 1 and "is 64 bytes long: the media driver has not finished creating it" in err
    path.unlink()
    cnc_file = CncFile.create(path, to_driver_buffer_length=1024 + 768, to_clients_buffer_length=1024 + 128,
                              counters_values_buffer_length=8192, error_log_buffer_length=4096, signal_ready=False)
    code, err = _run_stat_main(shm_dir, capsys)
    assert code == 1 and "cnc_version=0, the driver has not finished starting" in err
    put_int32_release(cnc_file.buffer, cnc.CNC_VERSION_FIELD_OFFSET, semantic_version(1, 0, 0))
    code, err = _run_stat_main(shm_dir, capsys)
    assert code == 1 and "cnc.dat version 1.0.0 is not compatible with 0.2.0" in err
    code = error_stat.main(["--dir", str(shm_dir), "--timeout", "0"])
    assert code == 1 and "aeron-error-stat:" in capsys.readouterr().err
    cnc_file.close()


@pytest.mark.parametrize("heartbeat, problem", [
    (10**9, "ms in the future"), (-5, "heartbeat=-5 is negative"), (0, "to-driver ring buffer head="),
])
def test_aeron_stat_calls_a_cnc_with_a_garbage_body_corrupt(shm_dir, capsys, heartbeat, problem):
    """Not a table of garbage counters under a negative heartbeat age: the file is named corrupt."""
    from tests.unit.cnc_support import write_garbage_cnc

    write_garbage_cnc(shm_dir / cnc.CNC_FILE, _epoch_ms() + heartbeat if heartbeat >= 0 else heartbeat)
    code, err = _run_stat_main(shm_dir, capsys)
    assert code == 1 and err.startswith(f"aeron-stat: {shm_dir / cnc.CNC_FILE} is corrupt (") and problem in err
    assert capsys.readouterr().out == ""


def _epoch_ms() -> int:
    import time
    return int(time.time() * 1000)


def test_open_cnc_waits_for_a_starting_driver(shm_dir):
    cnc_file = CncFile.create(shm_dir / cnc.CNC_FILE, to_driver_buffer_length=1024 + 768,
                              to_clients_buffer_length=1024 + 128, counters_values_buffer_length=8192,
                              error_log_buffer_length=4096, signal_ready=False)
    timer = threading.Timer(0.05, cnc_file.signal_ready)
    timer.start()
    try:
        opened = _common.open_cnc(shm_dir, timeout_ms=30_000)
        assert opened.cnc_version == cnc.CNC_VERSION
        opened.close()
    finally:
        timer.join()
        cnc_file.close()


# --- aeron-error-stat ------------------------------------------------------------------------------------


def test_error_stat_lines(driver_dir):
    cnc_file = CncFile.open(driver_dir / cnc.CNC_FILE)
    lines = error_stat.error_stat_lines(ErrorLogReader.read(cnc_file.error_log_buffer), UTC)
    cnc_file.close()
    assert lines == ERROR_LINES
    assert error_stat.error_stat_lines([]) == ["", "0 distinct errors observed."]


def test_error_stat_reads_a_log_inside_another_file(shm_dir, capsys, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    _common.time.tzset()
    path = shm_dir / "mark.dat"
    with MappedFile.create(path, 64 + 1024) as mapped:
        log = DistinctErrorLog(mapped.buffer[64:], epoch_clock=lambda: NOW_MS)
        log.record("archive error")
        del log
    try:
        assert error_stat.main(["--file", str(path), "--offset", "64"]) == 0
        assert capsys.readouterr().out.splitlines() == [
            "***", f"1 observations from {NOW_TEXT} to {NOW_TEXT} for:", " archive error", "", "1 distinct errors observed."
        ]
        assert error_stat.main(["--file", str(path), "--offset", str(64 + 1024)]) == 0
        assert capsys.readouterr().out.splitlines() == ["", "0 distinct errors observed."]
        assert error_stat.main(["--file", str(path), "--offset", "5000"]) == 1
        assert "--offset=5000 > length=1088" in capsys.readouterr().err
        assert error_stat.main(["--file", str(shm_dir / "none.dat")]) == 1
        assert "does not exist" in capsys.readouterr().err
    finally:
        monkeypatch.undo()
        _common.time.tzset()


def test_error_stat_reports_a_corrupt_log(shm_dir, capsys):
    path = shm_dir / "errors.dat"
    with MappedFile.create(path, 256) as mapped:
        log = DistinctErrorLog(mapped.buffer, epoch_clock=lambda: NOW_MS)
        log.record("good")
        mapped.buffer[32:36] = np.frombuffer(np.int32(5000).tobytes(), np.uint8)  # next record runs off the end
        del log
    assert error_stat.main(["--file", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1] == "1 distinct errors observed."
    assert "corrupt record" in captured.err


# --- aeron-loss-stat -------------------------------------------------------------------------------------


def test_loss_stat_lines(driver_dir):
    scan = loss_stat.scan_loss_report(driver_dir / loss_report.LOSS_REPORT_FILE)
    assert scan.corrupt_offset is None
    assert loss_stat.loss_stat_lines(scan.entries, UTC) == LOSS_LINES
    assert loss_stat.loss_stat_lines([]) == [LOSS_LINES[0], "0 entries read"]


def test_loss_stat_missing_empty_and_corrupt(shm_dir, capsys):
    assert loss_stat.main(["--dir", str(shm_dir)]) == 1
    assert capsys.readouterr().err == f"aeron-loss-stat: Loss report does not exist: {shm_dir / 'loss-report.dat'}\n"
    path = shm_dir / loss_report.LOSS_REPORT_FILE
    path.write_bytes(b"")
    assert loss_stat.main(["--dir", str(shm_dir)]) == 0
    assert capsys.readouterr().out.splitlines() == [LOSS_LINES[0], "0 entries read"]
    path.unlink()
    with MappedFile.create(path, 256) as mapped:
        report = LossReport(mapped.buffer)
        report.create_entry(1, NOW_MS, 1, 2, "aeron:ipc", "src")
        mapped.buffer[64:72] = 1  # a positive count ...
        mapped.buffer[104:108] = 0xFF  # ... and channel length -1
        del report
    assert loss_stat.main(["--dir", str(shm_dir)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1] == "1 entries read"
    assert f"{path}: corrupt entry at offset 64" in captured.err


# --- console entry points --------------------------------------------------------------------------------


def _run(module: str, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, TZ="UTC")
    env.pop("AERON_DIR", None)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", f"aeron_numba.tools.{module}", *args],
        capture_output=True, text=True, env=env, timeout=300,
    )


def test_entry_points_as_processes(driver_dir):
    before_ms = _common.epoch_ms()
    stat = _run("aeron_stat", "--once", env_extra={"AERON_DIR": str(driver_dir)})  # the dir from $AERON_DIR
    assert stat.returncode == 0, stat.stderr
    lines = stat.stdout.splitlines()
    assert _heartbeat_age(lines[0]) >= before_ms - (NOW_MS - HEARTBEAT_AGE_MS)
    assert lines[1:] == ["=" * 70, *system_rows(), *STREAM_ROWS, "--"]

    errors = _run("error_stat", "--dir", str(driver_dir))
    assert (errors.returncode, errors.stdout.splitlines(), errors.stderr) == (0, ERROR_LINES, "")
    losses = _run("loss_stat", "-d", str(driver_dir))
    assert (losses.returncode, losses.stdout.splitlines(), losses.stderr) == (0, LOSS_LINES, "")


def test_entry_points_report_a_missing_dir(shm_dir):
    missing = shm_dir / "no-driver"
    for module, tool, extra in (("aeron_stat", "aeron-stat", ["--once", "-t", "0"]),
                                ("error_stat", "aeron-error-stat", ["-t", "0"]),
                                ("loss_stat", "aeron-loss-stat", [])):
        result = _run(module, "--dir", str(missing), *extra)
        assert result.returncode == 1 and result.stdout == "", (module, result)
        if module == "loss_stat":
            assert result.stderr == f"{tool}: Loss report does not exist: {missing / 'loss-report.dat'}\n"
        else:
            assert result.stderr == f"{tool}: aeron directory {missing} does not exist: is a media driver running? (use --dir or $AERON_DIR)\n"


def test_console_scripts_are_declared():
    pyproject = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text())
    scripts = pyproject["project"]["scripts"]
    assert scripts == {
        "aeron-numba": "aeron_numba.__main__:main",
        "aeron-stat": "aeron_numba.tools.aeron_stat:main",
        "aeron-error-stat": "aeron_numba.tools.error_stat:main",
        "aeron-loss-stat": "aeron_numba.tools.loss_stat:main",
        "aeron-numba-driver": "aeron_numba.commands.driver:main",
        "aeron-numba-archive": "aeron_numba.commands.archive:main",
        "aeron-numba-cluster": "aeron_numba.commands.cluster:main",
        "aeron-numba-cluster-service": "aeron_numba.commands.cluster_service:main",
        "archive-tool": "aeron_numba.tools.archive_tool:main",
        "cluster-tool": "aeron_numba.tools.cluster_tool:main",
    }
    for target in scripts.values():
        module, function = target.split(":")
        assert callable(getattr(import_module(module), function))


def test_loss_report_reader_on_the_driver_file(driver_dir):
    # The tool and a plain reader agree (the tool adds nothing but formatting).
    with MappedFile.open(driver_dir / loss_report.LOSS_REPORT_FILE) as mapped:
        entries = LossReportReader.read(mapped.buffer)
    assert [(e.observation_count, e.total_bytes_lost, e.session_id, e.stream_id) for e in entries] == [
        (2, 4096, 1234, 1001), (1, 1408, -5, 7)
    ]
