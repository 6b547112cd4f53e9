"""Turning measured samples into results: HdrHistogram percentiles for latency, windowed rates for throughput.

A latency result keeps the per-window means as pyperf values (seconds per round trip, pyperf's unit) and
the full distribution as an encoded HdrHistogram (1 ns .. 1 hour, 3 significant digits), from which the
percentiles are read. A throughput result keeps, per window, seconds per message as pyperf values.
Results are plain JSON-able dicts: workers compute them and the parent merges them.
"""

from __future__ import annotations

import numpy as np
from hdrh.histogram import HdrHistogram

HDR_LOWEST_NS = 1
HDR_HIGHEST_NS = 3600 * 10**9
HDR_DIGITS = 3
PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9))


def new_histogram() -> HdrHistogram:
    return HdrHistogram(HDR_LOWEST_NS, HDR_HIGHEST_NS, HDR_DIGITS)


def record(histogram: HdrHistogram, values_ns: np.ndarray) -> None:
    """Record every value (ns) in one call per distinct value."""
    values = np.clip(np.asarray(values_ns, dtype=np.int64), HDR_LOWEST_NS, HDR_HIGHEST_NS)
    distinct, counts = np.unique(values, return_counts=True)
    for value, count in zip(distinct.tolist(), counts.tolist()):
        histogram.record_value(value, count)


def decode(encoded: str) -> HdrHistogram:
    return HdrHistogram.decode(encoded)


def _encode(histogram: HdrHistogram) -> str:
    encoded = histogram.encode()
    return encoded.decode("ascii") if isinstance(encoded, bytes) else encoded


def ticks_to_ns(ticks: np.ndarray, tsc_hz: float) -> np.ndarray:
    return np.rint(np.asarray(ticks, dtype=np.float64) * (1e9 / tsc_hz)).astype(np.int64)


def compiled_round_trips(case: dict, env, ping, what: str) -> dict:
    """The latency result of a compiled ping loop over the case's warm-up and runs: ``ping(base, count, lat,
    timeout_ticks)`` makes ``count`` round trips numbered from ``base``, puts each one's TSC ticks in ``lat`` and
    returns how many it completed; one that stops short raises ``"{done} of {count} {what}"``."""

    def batch(base: int, count: int) -> np.ndarray:
        lat = np.zeros(count, np.int64)
        done = ping(base, count, lat, env.timeout_ticks())
        if done != count:
            raise RuntimeError(f"{done} of {count} {what}")
        return ticks_to_ns(lat, env.tsc_hz)

    total = case["warmup"] + case["runs"] * case["n"]
    warm = batch(0, case["warmup"])
    runs = [batch(case["warmup"] + r * case["n"], case["n"]) for r in range(case["runs"])]
    return latency_result(runs, warm, case["windows"], received=total, expected=total, errors=0, timing="rdtsc")


def _window_means_s(values_ns: np.ndarray, windows: int) -> list[float]:
    windows = max(1, min(windows, values_ns.shape[0]))
    return [float(chunk.mean()) / 1e9 for chunk in np.array_split(values_ns, windows)]


def latency_result(runs_ns: list[np.ndarray], warmup_ns: np.ndarray | None, windows: int, **extra) -> dict:
    """Result of a latency benchmark from the per-run arrays of latencies (ns); warm-up values are kept out
    of the histogram and become pyperf warm-ups of the first run."""
    histogram = new_histogram()
    runs = []
    for index, values in enumerate(runs_ns):
        values = np.asarray(values, dtype=np.int64)
        if values.size == 0:
            raise ValueError(f"run {index} has no latency values")
        record(histogram, values)
        run = {"values": _window_means_s(values, windows), "loops": int(values.size // max(1, windows))}
        if index == 0 and warmup_ns is not None and len(warmup_ns):
            run["warmups"] = [[int(len(warmup_ns)), float(np.mean(warmup_ns)) / 1e9]]
        runs.append(run)
    everything = np.concatenate([np.asarray(v, dtype=np.int64) for v in runs_ns])
    figures = {name: int(histogram.get_value_at_percentile(p)) for name, p in PERCENTILES}
    figures["max"] = int(everything.max())
    figures["min"] = int(everything.min())
    figures["mean"] = float(everything.mean())
    return {
        "kind": "latency",
        "count": int(histogram.get_total_count()),
        "figures_ns": figures,
        "runs": runs,
        "hdr": _encode(histogram),
        **extra,
    }


def throughput_result(marks: list[tuple[int, int]], length: int, runs: int, **extra) -> dict:
    """Result of a throughput benchmark from ``(messages_so_far, perf_counter_ns)`` marks taken by the consumer
    (the first mark ends the warm-up); each pair of consecutive marks is one window, seconds per message
    being its pyperf value; the windows are split into ``runs`` pyperf runs."""
    windows = [((t1 - t0) / 1e9, c1 - c0) for (c0, t0), (c1, t1) in zip(marks, marks[1:])]
    if not windows or any(count <= 0 for _, count in windows):
        raise ValueError(f"no throughput window was measured (marks={marks})")
    seconds_per_message = [max(seconds, 1e-9) / count for seconds, count in windows]
    groups = np.array_split(np.array(seconds_per_message), max(1, min(runs, len(windows))))
    loops = int(round(sum(count for _, count in windows) / len(windows)))
    rate = 1.0 / float(np.median(seconds_per_message))
    return {
        "kind": "throughput",
        "count": int(sum(count for _, count in windows)),
        "length": int(length),
        "runs": [{"values": [float(v) for v in g], "loops": loops} for g in groups],
        "figures": {
            "msgs_per_s": rate,
            "mb_per_s": rate * length / 1e6,
            "best_msgs_per_s": 1.0 / min(seconds_per_message),
            "worst_msgs_per_s": 1.0 / max(seconds_per_message),
        },
        **extra,
    }
