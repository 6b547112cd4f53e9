"""Regressions in a benchmark series: a step found by step detection, worse than a threshold and significant.

The approach is asv's (its ``step_detect``), written here from the idea, not its code: a series of per-run
values is taken to be piecewise constant plus noise of one amplitude, and the regression is the most recent
step to a worse level that still holds at the end of the series.

1. **Fit** (``fit_steps``): the segments minimising ``sum of squared deviations + penalty * segments`` (the Potts
   problem), solved exactly by dynamic programming over prefix sums, O(n^2) for n runs. The penalty is
   ``2 * sigma^2 * ln(n)`` (BIC-like: each extra segment costs a level and a position), with the noise ``sigma``
   estimated robustly from successive differences (their median absolute value; a few steps or one outlier hardly
   move a median), floored at 0.1 % of the series' median so a noiseless series does not split on rounding.
2. **Merge** (``merge_small_steps``): adjacent segments less than ``threshold`` apart become one, so a real
   step the fit split in two (its noise estimate came out low) is judged whole.
3. **Step** (``judge``): from the latest boundary backwards, the first one where the level gets worse by more
   than ``threshold`` (10 %) and the last level is still that much worse than the level before the step. One
   noisy run in the middle makes a short segment whose step back leaves the last level as it was: not a step.
4. **Significance** (``welch_t_test``): Welch's t-test between the runs of the segment before the step and the
   runs of the segment after it, two-sided, the p-value from Student's t distribution with Welch-Satterthwaite
   degrees of freedom (the regularized incomplete beta function, by its continued fraction: scipy is not a
   dependency). The unit is the run, not the samples within a run: samples of one run share its machine state,
   so a single noisy run with many samples must not look significant. A side with one run has no spread, so a
   step at the very last run waits for a second run to confirm it.

The series are small (one value per run), so this is plain numpy on the driver, not a Spark job.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DEFAULT_THRESHOLD = 0.10  # a step must be more than 10 % worse
DEFAULT_ALPHA = 0.05  # and its p-value below this
MIN_RELATIVE_SIGMA = 1e-3
BETTER = ("lower", "higher")


def fit_steps(values, penalty: float | None = None) -> list[tuple[int, int]]:
    """The segments ``[(start, end), ...]`` (end exclusive, covering ``values`` in order) of the best piecewise
    constant fit; ``penalty`` (cost of one more segment, in squared units of ``values``) defaults to
    ``2 * sigma^2 * ln(n)``."""
    y = np.asarray(values, dtype=np.float64)
    n = y.shape[0]
    if n == 0:
        return []
    if not np.all(np.isfinite(y)):
        raise ValueError(f"a series holds a value that is not finite: {y[~np.isfinite(y)][0]}")
    if penalty is None:
        penalty = 2.0 * noise_sigma(y) ** 2 * math.log(max(n, 2))
    # The fit does not change with the scale; near 1 the prefix sums of squares keep their precision (a rate
    # of 3e7 msgs/s squared and summed over many runs would cancel away the noise's digits).
    scale = float(np.median(np.abs(y))) or 1.0
    y, penalty = y / scale, penalty / (scale * scale)
    s1 = np.concatenate(([0.0], np.cumsum(y)))
    s2 = np.concatenate(([0.0], np.cumsum(y * y)))
    best = np.empty(n + 1)
    best[0] = -penalty  # the first segment is free
    start_of = np.zeros(n + 1, dtype=np.int64)
    for end in range(1, n + 1):
        starts = np.arange(end)
        length = end - starts
        total = s1[end] - s1[starts]
        cost = (s2[end] - s2[starts]) - total * total / length  # squared deviations from the segment's mean
        candidates = best[:end] + np.maximum(cost, 0.0) + penalty
        start_of[end] = int(np.argmin(candidates))
        best[end] = candidates[start_of[end]]
    segments = []
    end = n
    while end > 0:
        segments.append((int(start_of[end]), end))
        end = int(start_of[end])
    return segments[::-1]


def merge_small_steps(values, segments: list[tuple[int, int]], threshold: float) -> list[tuple[int, int]]:
    """``segments`` with every step smaller than ``threshold`` (relative) merged away, the smallest first.

    The noise estimate of a short series is itself noisy: when it comes out low, the fit splits one real step
    into two smaller ones, or a level into pieces, and no single boundary is then worse than the threshold.
    Steps under the threshold cannot be a regression anyway, so merging them keeps only the steps that matter,
    each between the whole levels on either side."""
    y = np.asarray(values, dtype=np.float64)
    segments = list(segments)
    while len(segments) > 1:
        levels = [float(y[s:e].mean()) for s, e in segments]
        steps = [abs(b - a) / abs(a) if a else math.inf for a, b in zip(levels, levels[1:])]
        k = int(np.argmin(steps))
        if steps[k] > threshold:
            break
        segments[k:k + 2] = [(segments[k][0], segments[k + 1][1])]
    return segments


def noise_sigma(values) -> float:
    """Robust noise amplitude of a series: successive differences of noise have sigma * sqrt(2); 1.4826 turns a
    median absolute value into a normal sigma."""
    y = np.asarray(values, dtype=np.float64)
    floor = MIN_RELATIVE_SIGMA * abs(float(np.median(y))) if y.size else 0.0
    if y.size < 3:
        return max(floor, 1e-12)
    sigma = 1.4826 * float(np.median(np.abs(np.diff(y)))) / math.sqrt(2.0)
    return max(sigma, floor, 1e-12)


def worsening(before: float, after: float, better: str) -> float:
    """How much worse ``after`` is than ``before`` as a fraction of ``before`` (negative: better)."""
    if better not in BETTER:
        raise ValueError(f"better={better!r} is not one of {', '.join(BETTER)}")
    if before == 0:
        return 0.0 if after == before else math.inf
    change = (after - before) / abs(before)
    return change if better == "lower" else -change


def welch_t_test(a, b) -> float:
    """Two-sided p-value of Welch's t-test that ``a`` and ``b`` have the same mean; NaN when a side has fewer than
    two values (no spread to judge by)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.size < 2 or b.size < 2:
        return math.nan
    va, vb = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size
    difference = float(b.mean() - a.mean())
    if va + vb == 0.0:
        return 0.0 if difference != 0.0 else 1.0
    t = difference / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va * va / (a.size - 1) + vb * vb / (b.size - 1))
    return student_t_two_sided(t, df)


def student_t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2)."""
    return regularized_incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), from its continued fraction (evaluated on the side where it converges fast)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction 1/(1+ d1/(1+ d2/(1+ ...))) of I_x(a, b), by Lentz's method, where
    d_{2m+1} = -(a+m)(a+b+m)x / ((a+2m)(a+2m+1)) and d_{2m} = m(b-m)x / ((a+2m-1)(a+2m))."""
    tiny = 1e-300

    def guard(v: float) -> float:
        return v if abs(v) > tiny else tiny

    numerator_c, inverse_d = 1.0, 1.0 / guard(1.0 - (a + b) * x / (a + 1.0))
    result = inverse_d
    for m in range(1, 500):
        for coefficient in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            inverse_d = 1.0 / guard(1.0 + coefficient * inverse_d)
            numerator_c = guard(1.0 + coefficient / numerator_c)
            factor = numerator_c * inverse_d
            result *= factor
        if abs(factor - 1.0) < 1e-15:
            break
    return result


@dataclass(frozen=True)
class SeriesVerdict:
    """What ``judge`` found in one series. ``status``: ``regression`` (a step worse than the threshold, significant),
    ``not significant`` (such a step whose p-value is not below alpha, e.g. one run after it), ``ok`` (no such
    step) or ``too few runs``. ``step_index`` is the first run of the worse level (None without a step)."""

    status: str
    runs: int
    segments: tuple[tuple[int, int], ...]
    levels: tuple[float, ...]
    before: float | None
    after: float | None
    change: float | None  # after / before - 1 (raw, whichever way is better)
    worse: float | None  # the fraction by which after is worse than before
    p_value: float | None
    step_index: int | None

    @property
    def regression(self) -> bool:
        return self.status == "regression"


def judge(values, better: str, threshold: float = DEFAULT_THRESHOLD, alpha: float = DEFAULT_ALPHA) -> SeriesVerdict:
    """The verdict on one series of per-run ``values`` in run order (``better``: ``lower`` or ``higher``)."""
    if better not in BETTER:
        raise ValueError(f"better={better!r} is not one of {', '.join(BETTER)}")
    if not threshold > 0:
        raise ValueError(f"threshold={threshold} must be > 0 (a fraction: 0.10 is 10 %)")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha} must be between 0 and 1")
    y = np.asarray(values, dtype=np.float64)
    if y.size < 2:
        level = float(y[0]) if y.size else None
        return SeriesVerdict("too few runs", int(y.size), ((0, int(y.size)),) if y.size else (), 
                             (level,) if y.size else (), level, level, None, None, None, None)
    segments = merge_small_steps(y, fit_steps(y), threshold)
    levels = tuple(float(y[s:e].mean()) for s, e in segments)
    candidate = None
    for k in range(len(segments) - 1, 0, -1):
        before, after, last = levels[k - 1], levels[k], levels[-1]
        if worsening(before, after, better) <= threshold or worsening(before, last, better) <= threshold:
            continue
        (s0, e0), (s1, e1) = segments[k - 1], segments[k]
        p = welch_t_test(y[s0:e0], y[s1:e1])
        found = SeriesVerdict("regression" if p < alpha else "not significant", int(y.size), tuple(segments), levels,
                              before, after, after / before - 1.0 if before else None,
                              worsening(before, after, better), None if math.isnan(p) else p, s1)
        if found.regression:
            return found
        candidate = candidate or found  # the most recent step that did not hold up; an earlier one still may
    if candidate is not None:
        return candidate
    first, last = levels[0], levels[-1]
    return SeriesVerdict("ok", int(y.size), tuple(segments), levels, first, last,
                         last / first - 1.0 if first else None, worsening(first, last, better), None, None)
