"""The regression gate's judgement on made-up runs (no benchmark is run here)."""

from __future__ import annotations

import json

import pytest

from benchmarks import gate, report

GATED = [r for r in report.RATIOS if r.gate is not None]


def _summary(profile: str, values: dict, failed: tuple = (), floor: float = 100.0) -> dict:
    ratios = {r.name: {"value": values.get(r.name, 1.0), "better": r.better} for r in report.RATIOS}
    cases = {"rtt.aeron-compiled.32B": {"ok": True}}
    for name in failed:
        cases[name] = {"ok": False, "error": "TimeoutError: stuck"}
    return {"meta": {"profile": profile}, "placement": {"floor_compiled_p50_ns": floor}, "ratios": ratios,
            "cases": cases}


def _baseline(tmp_path, *summaries) -> dict:
    path = tmp_path / "baseline.json"
    for summary in summaries:
        gate.update_baseline(path, summary)
    return gate.load_baseline(path)


def test_every_gated_ratio_has_a_direction_and_a_sensible_threshold():
    assert GATED
    for ratio in GATED:
        assert ratio.better in ("lower", "higher")
        assert 1.0 < ratio.gate <= 5.0


@pytest.mark.parametrize("ratio", GATED, ids=lambda r: r.name)
def test_a_ratio_worse_than_allowed_fails_and_within_passes(ratio, tmp_path):
    baseline = _baseline(tmp_path, _summary("quick", {}))
    factor = ratio.gate * 1.1
    worse = factor if ratio.better == "lower" else 1 / factor
    outcome = gate.compare(_summary("quick", {ratio.name: worse}, floor=120.0), baseline)
    assert not outcome["passed"]
    assert [row["ratio"] for row in outcome["rows"] if row["status"] == "WORSE"] == [ratio.name]
    slightly = ratio.gate * 0.9
    within = slightly if ratio.better == "lower" else 1 / slightly
    assert gate.compare(_summary("quick", {ratio.name: within}), baseline)["passed"]
    better = 0.1 if ratio.better == "lower" else 10.0
    assert gate.compare(_summary("quick", {ratio.name: better}), baseline)["passed"]


def test_placement_sensitive_ratios_are_judged_only_against_a_similar_floor(tmp_path):
    baseline = _baseline(tmp_path, _summary("quick", {}, floor=80.0))
    sensitive = next(r for r in GATED if r.placement_sensitive)
    insensitive = next(r for r in GATED if not r.placement_sensitive)
    much_worse = {r.name: (10.0 if r.better == "lower" else 0.1) for r in (sensitive, insensitive)}
    outcome = gate.compare(_summary("quick", much_worse, floor=400.0), baseline)
    status = {row["ratio"]: row["status"] for row in outcome["rows"]}
    assert status[sensitive.name] == "not judged"
    assert status[insensitive.name] == "WORSE"
    assert "placed differently" in gate.format_outcome(outcome)

    both = _baseline(tmp_path, _summary("quick", much_worse, floor=400.0))  # adds a second placement
    assert len(both["profiles"]["quick"]["placements"]) == 2
    assert gate.compare(_summary("quick", much_worse, floor=380.0), both)["passed"]
    assert not gate.compare(_summary("quick", much_worse, floor=85.0), both)["passed"]


def test_updating_a_placement_replaces_its_entry(tmp_path):
    baseline = _baseline(tmp_path, _summary("quick", {}, floor=80.0), _summary("quick", {GATED[0].name: 2.0}, floor=90.0))
    (entry,) = baseline["profiles"]["quick"]["placements"]
    assert entry["floor_compiled_p50_ns"] == 90.0 and entry["ratios"][GATED[0].name] == 2.0


def test_a_failed_benchmark_or_missing_ratio_fails_the_gate(tmp_path):
    baseline = _baseline(tmp_path, _summary("quick", {}))
    outcome = gate.compare(_summary("quick", {}, failed=("rtt.zmq.32B",)), baseline)
    assert not outcome["passed"]
    assert "FAIL: benchmark rtt.zmq.32B failed: TimeoutError: stuck" in gate.format_outcome(outcome)
    missing = _summary("quick", {})
    missing["ratios"][GATED[0].name]["value"] = None
    outcome = gate.compare(missing, baseline)
    assert not outcome["passed"] and "was not measured" in gate.format_outcome(outcome)


def test_profiles_are_kept_apart_and_a_missing_profile_falls_back_to_full(tmp_path):
    baseline = _baseline(tmp_path, _summary("full", {}), _summary("quick", {GATED[0].name: 2.0}))
    assert set(baseline["profiles"]) == {"full", "quick"}
    assert baseline["profiles"]["quick"]["placements"][0]["ratios"][GATED[0].name] == 2.0
    assert baseline["profiles"]["full"]["placements"][0]["ratios"][GATED[0].name] == 1.0
    outcome = gate.compare(_summary("tiny", {}), baseline)
    assert any("compared with profile 'full'" in note for note in outcome["notes"])


def test_the_stored_baseline_covers_every_gated_ratio_for_quick_and_full():
    baseline = json.loads(gate.DEFAULT_BASELINE.read_text())
    for profile in ("quick", "full"):
        placements = baseline["profiles"][profile]["placements"]
        assert placements
        for entry in placements:
            assert entry["floor_compiled_p50_ns"] > 0
            for ratio in GATED:
                assert entry["ratios"][ratio.name] > 0, (profile, ratio.name)
