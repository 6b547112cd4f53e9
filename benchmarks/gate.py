"""The regression gate: compare a run's ratios with the stored baseline, fail when one got worse past its limit.

Only ratios are compared (ours against the floor or a peer measured in the same run): absolute figures
change with the machine and its load, ratios much less. Each gated ratio in ``report.RATIOS`` has its own
allowed worsening factor, chosen for noisy shared CI machines running the short (``quick``) profile:

* 2.0x for the round trip p50 against its floor (the cache-line / Python store+load ping-pong): a real
  regression of the data path (a lost compiled path, an allocation or an extra copy per message) moves
  these by more than that, while a p50 hardly moves with scheduling noise;
* 2.5x for stream bandwidth against memcpy: window rates of a 2-core machine under load swing about 2x
  between runs (measured while other tests ran);
* 3.0x for ratios against peers (iceoryx2 round trip, pyzmq throughput): their own figures swing with
  the kernel's scheduling.

Placement: on these KVM guests the two vCPUs sometimes share a physical core and sometimes do not; the
compiled floor then moves between about 80 ns and 400 ns, and the ratios against it with it (a shared core
transfers cache lines fast but halves each side's compute). So a profile's baseline keeps one entry per
placement, keyed by the compiled floor's p50; a run is judged against the entry with the nearest floor, and
ratios marked ``placement_sensitive`` are judged only when that floor is within ``PLACEMENT_TOLERANCE`` of
the run's (otherwise they are reported as "not judged"; record the new placement with
``--update-baseline``).

A gated ratio that is missing from the run (its benchmark failed) fails the gate; one missing from the
baseline is reported and not judged.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from benchmarks import report

DEFAULT_BASELINE = Path(__file__).with_name("baseline.json")
PLACEMENT_TOLERANCE = 2.0  # floors within this factor count as the same placement
_FLOOR = "floor_compiled_p50_ns"


def load_summary(path: str | Path) -> dict:
    with open(path) as f:
        return json.load(f)


def load_baseline(path: str | Path) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise SystemExit(f"no baseline at {path}: record one with `python -m benchmarks gate --update-baseline`") from None


def _floor(summary: dict) -> float | None:
    return (summary.get("placement") or {}).get(_FLOOR)


def _same_placement(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and a > 0 and b > 0 and max(a, b) / min(a, b) <= PLACEMENT_TOLERANCE


def update_baseline(path: str | Path, summary: dict) -> dict:
    """Store ``summary``'s ratios as the baseline of its profile and placement (the entry with a similar
    compiled floor is replaced; other placements and profiles are kept, and get this run's placement-insensitive
    ratios)."""
    path = Path(path)
    data = json.loads(path.read_text()) if path.exists() else {}
    data["about"] = ("Ratios of benchmark runs per profile and per placement of the two workers' vCPUs (keyed by "
                     "the compiled cache-line floor's p50); written by `python -m benchmarks gate [--quick] "
                     "--update-baseline`, compared by `python -m benchmarks gate`.")
    meta = summary["meta"]
    floor = _floor(summary)
    entry = {
        _FLOOR: floor,
        "recorded": {k: meta.get(k) for k in ("date", "cpu_model", "python", "numba", "pinning", "load_avg_start",
                                               "load_avg_end")},
        "ratios": {name: r["value"] for name, r in summary["ratios"].items() if r["value"] is not None},
    }
    placements = data.setdefault("profiles", {}).setdefault(meta["profile"], {}).setdefault("placements", [])
    placements[:] = [p for p in placements if not _same_placement(p.get(_FLOOR), floor)] + [entry]
    placements.sort(key=lambda p: p.get(_FLOOR) or 0)
    # A ratio that does not depend on the placement is the same baseline for every placement of the profile.
    for spec in report.RATIOS:
        if not spec.placement_sensitive and spec.name in entry["ratios"]:
            for placement in placements:
                placement["ratios"][spec.name] = entry["ratios"][spec.name]
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


def _nearest(placements: list[dict], floor: float | None) -> dict:
    if floor is None or floor <= 0:
        return placements[0]
    return min(placements, key=lambda p: abs(math.log((p.get(_FLOOR) or 1e-9) / floor)))


def compare(summary: dict, baseline: dict, threshold: float | None = None) -> dict:
    """Judge ``summary`` against ``baseline``: ``{"passed", "profile", "rows", "failed_cases", "notes"}``.

    Each row: ``ratio, baseline, current, worsening`` (> 1 means worse, whichever way is better), ``allowed``
    and ``status`` (``ok``, ``WORSE``, ``MISSING``, ``no baseline`` or ``not judged``). ``threshold`` overrides
    every allowed factor.
    """
    profile = summary["meta"]["profile"]
    profiles = baseline.get("profiles", {})
    notes = []
    chosen = profile
    if profile not in profiles:
        chosen = "full" if "full" in profiles else next(iter(profiles), None)
        if chosen is None:
            raise SystemExit("the baseline holds no profile")
        notes.append(f"no baseline for profile {profile!r}: compared with profile {chosen!r}")
    placements = profiles[chosen].get("placements") or []
    if not placements:
        raise SystemExit(f"the baseline of profile {chosen!r} holds no placement")
    floor = _floor(summary)
    base = _nearest(placements, floor)
    same = _same_placement(base.get(_FLOOR), floor)
    cpu = summary["meta"].get("cpu_model")
    notes.append(f"compiled floor p50 {floor} ns in this run ({cpu or 'cpu unknown'}, load average "
                 f"{summary['meta'].get('load_avg_start')}), {base.get(_FLOOR)} ns in the baseline entry used "
                 f"({base.get('recorded', {}).get('cpu_model') or 'cpu unknown'})"
                 + ("" if same else ": the workers' vCPUs are placed differently, so placement-sensitive ratios are "
                                    "not judged (record this placement with --update-baseline)"))
    rows = []
    for spec in report.RATIOS:
        if spec.gate is None:
            continue
        allowed = threshold if threshold is not None else spec.gate
        current = summary["ratios"].get(spec.name, {}).get("value")
        previous = base["ratios"].get(spec.name)
        row = {"ratio": spec.name, "better": spec.better, "baseline": previous, "current": current, "allowed": allowed,
               "worsening": None}
        if current is not None and previous is not None:
            row["worsening"] = current / previous if spec.better == "lower" else previous / current
        if current is None:
            row["status"] = "MISSING"
        elif previous is None:
            row["status"] = "no baseline"
        elif spec.placement_sensitive and not same:
            row["status"] = "not judged"
        else:
            row["status"] = "ok" if row["worsening"] <= allowed else "WORSE"
        rows.append(row)
    failed_cases = {name: c.get("error") for name, c in summary["cases"].items() if not c.get("ok")}
    passed = not failed_cases and all(row["status"] not in ("WORSE", "MISSING") for row in rows)
    return {"passed": passed, "profile": profile, "rows": rows, "failed_cases": failed_cases, "notes": notes}


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def format_outcome(outcome: dict) -> str:
    lines = [f"benchmark gate, profile {outcome['profile']}: {'PASSED' if outcome['passed'] else 'FAILED'}"]
    lines += outcome["notes"]
    header = ["ratio", "better", "baseline", "current", "change", "allowed", "status"]
    rows = []
    for row in outcome["rows"]:
        if row["worsening"] is None:
            change = "-"
        else:
            w = row["worsening"]
            change = f"{w:.2f}x {'worse' if w > 1 else 'better'}" if abs(w - 1) > 0.005 else "same"
        rows.append([row["ratio"], row["better"], _fmt(row["baseline"]), _fmt(row["current"]), change,
                     f"{row['allowed']:.2f}x worse", row["status"]])
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    for row in outcome["rows"]:
        if row["status"] == "WORSE":
            lines.append(f"FAIL: {row['ratio']} went from {_fmt(row['baseline'])} to {_fmt(row['current'])} "
                         f"({row['worsening']:.2f}x worse, {row['better']} is better; allowed {row['allowed']:.2f}x)")
        elif row["status"] == "MISSING":
            lines.append(f"FAIL: {row['ratio']} was not measured (a benchmark behind it failed)")
    for name, error in outcome["failed_cases"].items():
        lines.append(f"FAIL: benchmark {name} failed: {error}")
    return "\n".join(lines)
