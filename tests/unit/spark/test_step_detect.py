"""Step detection and significance for the benchmark history: the fit against a brute-force search, the
t distribution against known values, and the verdicts on series with noise only, a 15 % step, a 5 % step and
one noisy run (seeded noise of 2 %, about what a benchmark ratio shows from run to run here)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from aeron_numba.spark import step_detect as sd

SEEDS = range(40)
NOISE = 0.02


def _series(seed: int, levels: list[tuple[int, float]], noise: float = NOISE) -> np.ndarray:
    base = np.concatenate([np.full(count, level) for count, level in levels])
    return base * (1 + noise * np.random.default_rng(seed).standard_normal(base.size))


# ------------------------------------------------------------------------------------------- the fit
def _objective(y, segments, penalty):
    return sum(((y[s:e] - y[s:e].mean()) ** 2).sum() for s, e in segments) + penalty * (len(segments) - 1)


def _brute_force(y, penalty):
    """Every segmentation of ``y``: the obvious, slow minimum."""
    n = len(y)
    best = None
    for k in range(n):
        for cuts in itertools.combinations(range(1, n), k):
            bounds = (0, *cuts, n)
            segments = list(zip(bounds, bounds[1:]))
            cost = _objective(y, segments, penalty)
            if best is None or cost < best[0] - 1e-12:
                best = (cost, segments)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_fit_is_the_minimum_over_every_segmentation(seed):
    rng = np.random.default_rng(seed)
    y = np.repeat(rng.uniform(0, 3, 3), [3, 3, 2]) + 0.2 * rng.standard_normal(8)  # three levels, 8 runs
    penalty = float(rng.uniform(0.05, 1.0))
    segments = sd.fit_steps(y, penalty)
    assert segments[0][0] == 0 and segments[-1][1] == len(y)
    assert all(a[1] == b[0] for a, b in zip(segments, segments[1:]))
    assert _objective(y, segments, penalty) == pytest.approx(_brute_force(y, penalty)[0], abs=1e-9)


def test_the_fit_does_not_depend_on_the_scale():
    y = _series(5, [(20, 1.0), (20, 1.12), (20, 0.95)])
    assert sd.fit_steps(y) == sd.fit_steps(y * 3e7) == sd.fit_steps(y * 1e-9) == [(0, 20), (20, 40), (40, 60)]


def test_fit_finds_a_clean_step_and_keeps_a_flat_series_whole():
    assert sd.fit_steps([1.0] * 6 + [1.15] * 6) == [(0, 6), (6, 12)]
    assert sd.fit_steps([5.0] * 10) == [(0, 10)]
    assert sd.fit_steps([]) == []
    with pytest.raises(ValueError, match="not finite: nan"):
        sd.fit_steps([1.0, float("nan")])


# ------------------------------------------------------------------------------------ the statistics
def test_incomplete_beta_matches_its_closed_forms():
    for x in (0.01, 0.3, 0.5, 0.77, 0.99):
        assert sd.regularized_incomplete_beta(2.5, 1.0, x) == pytest.approx(x ** 2.5, rel=1e-12)
        assert sd.regularized_incomplete_beta(1.0, 3.0, x) == pytest.approx(1 - (1 - x) ** 3, rel=1e-12)
        assert sd.regularized_incomplete_beta(4.0, 7.0, x) == pytest.approx(
            1 - sd.regularized_incomplete_beta(7.0, 4.0, 1 - x), abs=1e-13)
    assert sd.regularized_incomplete_beta(3.0, 2.0, 0.0) == 0.0
    assert sd.regularized_incomplete_beta(3.0, 2.0, 1.0) == 1.0


@pytest.mark.parametrize(("t", "df", "p"), [
    (1.0, 1, 0.5),  # Cauchy: P(|T| > 1) = 1/2
    (12.706204736, 1, 0.05), (4.302652730, 2, 0.05), (2.228138852, 10, 0.05), (3.169272673, 10, 0.01),
    (1.959963985, 1e9, 0.05),  # the normal limit
    (0.0, 5, 1.0),
])
def test_student_t_p_values_match_the_tables(t, df, p):
    assert sd.student_t_two_sided(t, df) == pytest.approx(p, rel=1e-6)
    assert sd.student_t_two_sided(-t, df) == pytest.approx(p, rel=1e-6)


def test_welch_t_test():
    a, b = [10.0, 11.0, 12.0, 11.0], [13.0, 14.0, 15.0, 16.0, 14.0]
    # t and Welch-Satterthwaite degrees of freedom by hand, then the table value through the t distribution.
    va, vb = np.var(a, ddof=1) / 4, np.var(b, ddof=1) / 5
    t = (np.mean(b) - np.mean(a)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 4)
    assert sd.welch_t_test(a, b) == pytest.approx(sd.student_t_two_sided(t, df))
    assert sd.welch_t_test(a, b) == sd.welch_t_test(b, a) < 0.01
    assert math.isnan(sd.welch_t_test([1.0], [2.0, 3.0]))  # one run: no spread to judge by
    assert sd.welch_t_test([1.0, 1.0], [2.0, 2.0]) == 0.0
    assert sd.welch_t_test([1.0, 1.0], [1.0, 1.0]) == 1.0


# ------------------------------------------------------------------------------------------ verdicts
@pytest.mark.parametrize("better", sd.BETTER)
def test_noise_only_stays_clean(better):
    for seed in SEEDS:
        verdict = sd.judge(_series(seed, [(16, 1.0)]), better)
        assert verdict.status == "ok", (seed, verdict)


def test_a_15_percent_slowdown_is_flagged_at_its_first_run():
    for seed in SEEDS:
        verdict = sd.judge(_series(seed, [(8, 100.0), (6, 115.0)]), "lower")
        assert verdict.regression and verdict.step_index == 8, (seed, verdict)
        # Means of 8 and 6 runs with 2 % noise: within 5 points of the true step.
        assert verdict.worse == pytest.approx(0.15, abs=0.05) and verdict.p_value < 1e-4
        assert verdict.before == pytest.approx(100, rel=0.03) and verdict.after == pytest.approx(115, rel=0.03)


def test_a_15_percent_throughput_drop_is_a_regression_and_a_rise_is_not():
    for seed in SEEDS:
        drop = sd.judge(_series(seed, [(8, 1e6), (6, 0.85e6)]), "higher")
        assert drop.regression and drop.step_index == 8 and drop.change == pytest.approx(-0.15, abs=0.05)
        assert sd.judge(_series(seed, [(8, 1e6), (6, 1.15e6)]), "higher").status == "ok"
        assert sd.judge(_series(seed, [(8, 1.0), (6, 0.85)]), "lower").status == "ok"  # faster


def test_a_5_percent_step_is_below_the_threshold():
    for seed in SEEDS:
        assert sd.judge(_series(seed, [(8, 1.0), (8, 1.05)]), "lower").status == "ok", seed


def test_one_noisy_run_is_not_a_regression():
    for seed in SEEDS:
        middle = _series(seed, [(14, 1.0)])
        middle[6] *= 1.4
        assert sd.judge(middle, "lower").status == "ok", seed
        last = _series(seed, [(14, 1.0)])
        last[-1] *= 1.4  # a step at the last run has one run after it: no spread, waits for the next run
        verdict = sd.judge(last, "lower")
        assert verdict.status == "not significant" and verdict.p_value is None and verdict.step_index == 13


def test_a_regression_before_a_noisy_run_is_still_found():
    y = _series(3, [(6, 1.0), (8, 1.15)])
    y[9] *= 1.4
    verdict = sd.judge(y, "lower")
    assert verdict.regression and verdict.step_index == 6


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="better='faster' is not one of lower, higher"):
        sd.judge([1.0, 2.0], "faster")
    with pytest.raises(ValueError, match="threshold=0 must be > 0"):
        sd.judge([1.0, 2.0], "lower", threshold=0)
    with pytest.raises(ValueError, match="alpha=1.5 must be between 0 and 1"):
        sd.judge([1.0, 2.0], "lower", alpha=1.5)
    assert sd.judge([1.0], "lower").status == "too few runs"
