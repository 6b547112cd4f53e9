"""What a run measures: the cases, in order, with their counts for each profile.

Profiles: ``full`` (for people, about 2 minutes of measuring), ``quick`` (CI's gate, ~20 s of measuring, and
the UDP cases' short counts) and ``tiny`` (the smoke test: every case with counts just big enough to check the results are
well-formed). UDP cases run last, against a driver for each worker (``case["driver"] == "udp"``).
Counts are per implementation speed, so every case measures for a comparable time.

Case names are the pyperf benchmark names: ``<family>.<impl>[.<publication>].<size or rate>``.
"""

from __future__ import annotations

import copy
import fnmatch

KIB = 1024
MIB = 1024 * KIB

MESSAGE_SIZES = (32, 288, 1344)
RTT_SIZE = 32
#: Latency logs: 1 MiB terms keep the driver's pub-lmt window (half a term) ms ahead of a 200 MB/s ping-pong.
LATENCY_TERM_LENGTH = 1 * MIB
#: Throughput logs: 16 MiB terms, so the producer is not held by how often the (Python) driver moves pub-lmt.
THROUGHPUT_TERM_LENGTH = 16 * MIB
FIXED_RATES = (10_000, 100_000, 1_000_000)
PYTHON_FIXED_RATES = (10_000, 100_000)  # a Python loop cannot offer and poll 1M messages/s

PROFILES: dict[str, dict] = {
    "full": {
        "rtt": {"compiled": (500_000, 5, 100_000), "python": (100_000, 3, 20_000), "peer": (20_000, 3, 2_000)},
        "rtt_windows": 10,
        "tp_windows": 10,
        "tp_runs": 2,
        "tp_window": {"compiled": {32: 1_000_000, 288: 400_000, 1344: 100_000}, "python": 100_000, "peer": 30_000},
        "tp_term_length": THROUGHPUT_TERM_LENGTH,
        "tp_log_warmup_passes": 2,
        "fixed_seconds": 2.0,
        "memcpy": (20, 10),
        "case_timeout_s": 120.0,
        "udp": {"rtt": (50_000, 3, 5_000), "tp_window": {32: 200_000, 288: 50_000, 1344: 20_000},
                "jumbo_tp_window": {32: 1_000_000, 288: 250_000, 1344: 100_000},
                "floor_window": 100_000, "jumbo_floor_window": 10_000},
    },
    "quick": {
        "rtt": {"compiled": (100_000, 3, 20_000), "python": (20_000, 2, 5_000), "peer": (3_000, 2, 500)},
        "rtt_windows": 5,
        "tp_windows": 5,
        "tp_runs": 1,
        "tp_window": {"compiled": {32: 500_000, 288: 200_000, 1344: 50_000}, "python": 30_000, "peer": 15_000},
        "tp_term_length": THROUGHPUT_TERM_LENGTH,
        "tp_log_warmup_passes": 1,
        "fixed_seconds": 0.3,
        "memcpy": (10, 5),
        "case_timeout_s": 60.0,
        "udp": {"rtt": (20_000, 2, 2_000), "tp_window": {32: 200_000, 288: 50_000, 1344: 20_000},
                "jumbo_tp_window": {32: 500_000, 288: 100_000, 1344: 50_000},
                "floor_window": 20_000, "jumbo_floor_window": 2_000},
    },
    "tiny": {
        "rtt": {"compiled": (2_000, 2, 200), "python": (300, 2, 50), "peer": (100, 2, 20)},
        "rtt_windows": 2,
        "tp_windows": 2,
        "tp_runs": 2,
        "tp_window": {"compiled": {32: 5_000, 288: 5_000, 1344: 2_000}, "python": 1_000, "peer": 500},
        "tp_term_length": 1 * MIB,
        "tp_log_warmup_passes": 0,
        "fixed_seconds": 0.01,
        "memcpy": (2, 2),
        "case_timeout_s": 30.0,
        "udp": {"rtt": (200, 2, 20), "tp_window": {32: 2_000, 288: 1_000, 1344: 500},
                "jumbo_tp_window": {32: 2_000, 288: 1_000, 1344: 500}, "floor_window": 500,
                "jumbo_floor_window": 100},
    },
}


def _frame_length(size: int) -> int:
    return (size + 32 + 31) // 32 * 32


def _rtt_cases(p: dict) -> list[dict]:
    cases = []
    for impl, speed in (
        ("aeron-compiled", "compiled"), ("floor-compiled", "compiled"),
        ("aeron-python", "python"), ("aeron-python-bytes", "python"),
        ("floor-python", "python"), ("floor-python-entry", "python"),
        ("zmq", "peer"), ("pipe", "peer"), ("iceoryx2", "peer"),
    ):
        n, runs, warmup = p["rtt"][speed]
        cases.append({
            "name": f"rtt.{impl}.{RTT_SIZE}B", "family": "rtt", "impl": f"rtt-{impl}", "label": impl, "size": RTT_SIZE,
            "n": n, "runs": runs, "warmup": warmup, "windows": p["rtt_windows"], "exclusive": True,
            "term_length": LATENCY_TERM_LENGTH, "needs_pipe": impl == "pipe",
        })
    return cases


def _fixed_rate_cases(p: dict) -> list[dict]:
    cases = []
    for impl, rates in (("aeron-compiled", FIXED_RATES), ("aeron-python", PYTHON_FIXED_RATES)):
        for rate in rates:
            cases.append({
                "name": f"fixed.{impl}.{rate // 1000}k", "family": "fixed", "impl": f"fixed-{impl}", "label": impl,
                "size": RTT_SIZE, "rate": rate, "seconds": p["fixed_seconds"], "warmup_fraction": 0.1,
                "windows": p["rtt_windows"], "exclusive": True, "term_length": LATENCY_TERM_LENGTH,
                "needs_pipe": False,
            })
    return cases


def _throughput_cases(p: dict) -> list[dict]:
    cases = []
    term_length = p["tp_term_length"]
    for size in MESSAGE_SIZES:
        for impl, speed in (("aeron-compiled", "compiled"), ("aeron-python", "python")):
            window = p["tp_window"][speed][size] if speed == "compiled" else p["tp_window"][speed]
            # Warm up over whole passes of the log, so every page of it has been touched once.
            log_warmup = p["tp_log_warmup_passes"] * 3 * term_length // _frame_length(size)
            for exclusive in (True, False):
                kind = "exclusive" if exclusive else "concurrent"
                cases.append({
                    "name": f"tp.{impl}.{kind}.{size}B", "family": "tp", "impl": f"tp-{impl}",
                    "label": f"{impl} {kind}", "size": size, "window": window, "windows": p["tp_windows"],
                    "runs": p["tp_runs"], "warmup": max(window, log_warmup if speed == "compiled" else window),
                    "exclusive": exclusive, "term_length": term_length, "needs_pipe": False,
                })
        for impl in ("zmq", "pipe", "iceoryx2"):
            window = p["tp_window"]["peer"]
            cases.append({
                "name": f"tp.{impl}.{size}B", "family": "tp", "impl": f"tp-{impl}", "label": impl, "size": size,
                "window": window, "windows": p["tp_windows"], "runs": p["tp_runs"], "warmup": window,
                "exclusive": False, "term_length": term_length, "needs_pipe": impl == "pipe",
            })
    iterations, windows = p["memcpy"]
    cases.append({
        "name": f"tp.memcpy.{term_length // MIB}MiB", "family": "tp", "impl": "tp-memcpy", "label": "memcpy",
        "size": term_length, "window": iterations, "windows": windows, "runs": 1, "warmup": iterations,
        "exclusive": False, "term_length": term_length, "needs_pipe": False,
    })
    return cases


def _udp_cases(p: dict) -> list[dict]:
    """UDP loopback from one driver to another (``"driver": "udp"``), beside raw UDP sockets. Profiles without
    a ``udp`` entry leave them out. The runner adds each case's ``udp_ports``."""
    udp = p.get("udp")
    if udp is None:
        return []
    from benchmarks.udp import FLOOR_DATAGRAM, JUMBO_FLOOR_DATAGRAM, JUMBO_MTU, YIELD_MASK

    n, runs, warmup = udp["rtt"]
    common = {"driver": "udp", "needs_pipe": False, "exclusive": True, "yield_mask": YIELD_MASK}
    no_driver = {**common, "driver": "none"}  # the raw-socket floors: no driver spinning beside them
    cases = [
        {"name": f"rtt.{impl}.{RTT_SIZE}B", "family": "rtt", "impl": f"rtt-{impl}", "label": impl, "size": RTT_SIZE,
         "n": n, "runs": runs, "warmup": warmup, "windows": p["rtt_windows"], "term_length": LATENCY_TERM_LENGTH,
         **(common if impl == "aeron-compiled-udp" else no_driver)}
        for impl in ("aeron-compiled-udp", "floor-udp", "relay-floor-udp")
    ]
    term_length = p["tp_term_length"]
    for size in MESSAGE_SIZES:
        window = udp["tp_window"][size]
        cases.append({
            "name": f"tp.aeron-compiled-udp.exclusive.{size}B", "family": "tp", "impl": "tp-aeron-compiled-udp",
            "label": "aeron-compiled-udp exclusive", "size": size, "window": window, "windows": p["tp_windows"],
            "runs": p["tp_runs"], "warmup": window, "term_length": term_length, **common,
        })
    # The same streams with the largest MTU (Aeron's limit, under loopback's 64 KiB): far fewer datagrams per byte.
    for size in MESSAGE_SIZES:
        window = udp["jumbo_tp_window"][size]  # about five times the datagram rate: longer windows, as long a time
        cases.append({
            "name": f"tp.aeron-compiled-udp-jumbo.exclusive.{size}B", "family": "tp", "impl": "tp-aeron-compiled-udp",
            "label": f"aeron-compiled-udp mtu={JUMBO_MTU} exclusive", "size": size, "window": window,
            "windows": p["tp_windows"], "runs": p["tp_runs"], "warmup": window, "term_length": term_length,
            "mtu": JUMBO_MTU, **common,
        })
    for name, label, datagram, window in (("floor-udp", "raw UDP (floor)", FLOOR_DATAGRAM, udp["floor_window"]),
                                          ("floor-udp-jumbo", "raw UDP (floor), jumbo datagrams", JUMBO_FLOOR_DATAGRAM,
                                           udp["jumbo_floor_window"])):
        cases.append({
            "name": f"tp.{name}.{datagram}B", "family": "tp", "impl": "tp-floor-udp", "label": label,
            "size": datagram, "window": window, "windows": p["tp_windows"], "runs": p["tp_runs"], "warmup": window,
            "term_length": term_length, **no_driver,
        })
    return cases


def build_plan(profile: str, only: list[str] | None = None) -> list[dict]:
    """The cases of ``profile`` in run order, optionally only those whose name matches one of the ``only``
    patterns (shell-style, or a plain substring)."""
    if profile not in PROFILES:
        raise ValueError(f"profile={profile!r} must be one of {sorted(PROFILES)}")
    p = PROFILES[profile]
    cases = _rtt_cases(p) + _fixed_rate_cases(p) + _throughput_cases(p) + _udp_cases(p)
    if only:
        cases = [c for c in cases if any(fnmatch.fnmatch(c["name"], pat) or pat in c["name"] for pat in only)]
        if not cases:
            families = sorted({c["name"].split(".")[0] for c in _rtt_cases(p) + _fixed_rate_cases(p)
                               + _throughput_cases(p) + _udp_cases(p)})
            raise ValueError(f"no case of profile {profile} matches --only {' '.join(only)}: give a shell-style "
                             f"pattern or a part of a case name (families {', '.join(families)}; e.g. 'rtt.*')")
    for case in cases:
        case["profile"] = profile
        case.setdefault("driver", "ipc")
    return copy.deepcopy(cases)
