"""Where a cell's noise sits: a repeat's mean TPS split into three parts of its variance.

On a shared machine the repeats of one cell spread by more than their own seconds
explain: most of the noise is fixed when a repeat starts and lasts through it. This
module says how much of each repeat's deviation comes from where, each part as the
relative standard deviation of *one repeat's mean* (a fraction of the cell's mean):

``within``
    what the per-second samples of the repeats predict for a repeat's mean: the
    per-second variance around each repeat's own mean, pooled over the repeats,
    divided by the seconds of a repeat and corrected for the correlation of one
    second with the next.
``between``
    the state at a repeat's start (the caches, where the scheduler put the processes,
    what the neighbours were doing then): the part of the repeats' short-term spread
    that their seconds do not explain.
``drift``
    the slow part: the level of the machine moving over the rounds, which the spread
    of all the repeats holds and the spread of successive repeats does not.

The estimators, for ``k`` repeats (means ``m_1 … m_k`` in the order they ran) of
``n_i`` seconds each (``x_i1 … x_in_i``):

1. **The seconds.** A profile common to every repeat (the first second lower while
   the clients connect) is in every repeat's mean alike, so it is not noise: the mean
   deviation of position ``t`` from its repeat's mean, over the repeats that have it,
   is subtracted first (positions held by one repeat only are left out). That takes
   ``1/k_t`` of each residual's variance with it, which is given back (the sums are
   divided by ``1 - 1/k_t``; exact when every repeat has the position). A second
   missing in the middle of a repeat is closed up; ``skip_first`` seconds can be left
   out (the tool keeps them: a separate warm-up runs before the repeats).
2. **Per-second variance and lag-1 correlation by moments.** The seconds are taken as
   stationary within a repeat, with variance ``a`` and covariance ``b`` between
   neighbouring seconds and none further apart (an MA(1) model). For a series of
   ``n`` seconds around its own mean, with ``V(n) = a/n + 2b(n-1)/n²`` the variance
   of its mean::

       E[Σ (x_t - x̄)²]                = (n-1)·a - 2(n-1)/n · b
       E[Σ (x_t - x̄)(x_t+1 - x̄)]      = (n-1)·b - (n+1)·V(n) + 2(a+b)/n

   Both sums, pooled over the repeats, give two linear equations in ``a`` and ``b``.
   Solving them, rather than dividing the second sum by the first, matters for short
   repeats: around a 5-second mean the plain lag-1 autocorrelation of *independent*
   seconds is -1/n = -0.2, so a plain estimate would call such seconds
   anticorrelated and take a fifth off the within part. ``ρ₁ = b/a`` is clipped to
   [-0.5, 0.5], the range an MA(1) series can have; a larger correlation means the
   seconds wander slowly, which this model does not hold (what it misses shows as
   ``between``). Repeats of 2 seconds say nothing about ``b`` (their two sums are
   proportional): with no longer ones ``b`` is 0. ``within² = mean_i V(n_i)``.
3. **The repeats.** ``S²``: the variance of the repeats' means (ddof 1). ``Q``: half
   their mean squared successive difference in running order (von Neumann, 1941),
   ``Σ (m_i+1 - m_i)² / (2(k-1))``: for a series without drift it estimates the same
   variance as ``S²``, and a drift that moves little from one repeat to the next adds
   next to nothing to it. Then ``between² = max(0, Q - within²)`` and
   ``drift² = max(0, S² - Q)``. Unclipped, the three add up to ``S²``; a part clipped
   at 0 is one the data cannot tell from nothing (its estimate is noisier than it).
   Below 3 repeats there is no split (with 2, ``S²`` and ``Q`` are the same number):
   ``between`` and ``drift`` are None and ``note`` says why.
4. **Whether a part is there at all.** ``drift_p``: von Neumann's ratio ``Q/S²``
   is 1 on average for repeats without drift, with variance (k-2)/(k²-1); a drift
   makes it smaller (one-sided normal approximation, right at the 5 % level from 6
   repeats on; with 3 it can never be small enough). ``between_p``: without a start
   state (nor drift) ``Q`` is ``within²`` times a χ² on ``2(k-1)²/(3k-4)`` degrees of
   freedom over themselves (the variance of half the mean squared successive
   difference of normal values), and ``within²`` its own χ² over degrees of freedom
   read from its jackknife variance over the repeats: their ratio is F-distributed.
   Small p: the part is there; a large one: these repeats cannot tell it from none,
   whatever its estimate.

Assumptions: the seconds of a repeat are stationary around its own level (beyond a
profile every repeat shares); repeats are independent apart from the slow drift; the
drift is smooth at the scale of one round. Each estimate is a difference of noisy
variances: with 10 repeats each part is uncertain by tens of percent of itself
(``bench/variance.py`` gives bootstrap intervals).

Worked by hand: three repeats of 4 seconds, the seconds ±6 around their repeat's mean
in patterns whose profile is 0, means 96, 100, 104 in running order. The moment
equations give a = 48, b = 0 (seconds independent), so within² = 48/4 = 12; S² = 16,
Q = (4² + 4²)/4 = 8, between² = max(0, 8 - 12) = 0, drift² = 16 - 8 = 8; relative to
the mean of 100:

>>> up, down, flat = [6, -6, -6, 6], [-6, 6, 6, -6], [0, 0, 0, 0]
>>> split = noise_split([Repeat(m, [m + x for x in p]) for m, p in
...                      ((96, up), (100, down), (104, flat))])
>>> split.repeats, split.seconds, split.seconds_per_repeat, split.lag1
(3, 12, 4.0, 0.0)
>>> [round(v, 4) for v in (split.within, split.between, split.drift, split.total)]
[0.0346, 0.0, 0.0283, 0.04]
>>> split.dominant
'within'
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# scipy.special, not scipy.stats: this module is imported by every read of a store
from scipy.special import fdtrc, ndtr

__all__ = ["PARTS", "NoiseSplit", "Repeat", "RepeatLength", "noise_split", "pooled_split",
           "repeat_length", "within_variance"]

PARTS = ("within", "between", "drift")
RHO_LIMIT = 0.5  # |lag-1 correlation| an MA(1) series can have


@dataclass(frozen=True)
class Repeat:
    """One measured repeat: its mean TPS (the figure the tool compares) and its
    per-second TPS in time order (empty when none were recorded)."""

    mean: float
    seconds: Sequence[float] = ()


@dataclass(frozen=True)
class NoiseSplit:
    """A cell's noise, each part the relative sd of one repeat's mean (a fraction of the
    cell's mean). ``total``: the repeats' spread (sd of their means over their mean);
    ``short_term``: √Q over the mean. ``lag1``: the lag-1 correlation of the seconds
    used (after the bias correction and clipping), ``lag1_raw`` the plain pooled one.
    ``between_p`` and ``drift_p``: one-sided p-values against the part being 0. Parts
    that cannot be told are None, and ``note`` says why."""

    repeats: int
    seconds: int  # per-second samples used
    seconds_per_repeat: float | None  # median over the repeats with seconds
    within: float | None
    between: float | None
    drift: float | None
    total: float | None
    short_term: float | None
    lag1: float | None
    lag1_raw: float | None
    note: str | None
    between_p: float | None = None
    drift_p: float | None = None
    within_df: float | None = None  # the degrees of freedom within² rests on (jackknife)
    # what a repeat costs beside its measured seconds (the run's, analysis/noise.py)
    overhead_s: float | None = None

    def part(self, name: str) -> float | None:
        value: float | None = getattr(self, name)
        return value

    @property
    def dominant(self) -> str | None:
        """The part with the largest variance, when all three are known and one is
        not 0."""
        values = [self.part(p) for p in PARTS]
        known = [v for v in values if v is not None]
        if len(known) < len(PARTS) or max(known) <= 0:
            return None
        return PARTS[known.index(max(known))]

    @property
    def dominant_told(self) -> bool:
        """Whether the dominant part is told from none at the 5 % level (the seconds'
        part always is: it is measured, not inferred)."""
        p = {"within": 0.0, "between": self.between_p, "drift": self.drift_p}.get(
            self.dominant or "")
        return p is not None and p < 0.05

    @property
    def dominant_share(self) -> float | None:
        """The dominant part's share of the three parts' variance."""
        if self.dominant is None:
            return None
        squares = [(self.part(p) or 0.0) ** 2 for p in PARTS]
        return (self.part(self.dominant) or 0.0) ** 2 / sum(squares)


def _profile(series: list[list[float]]) -> tuple[list[list[float]], list[list[float]]]:
    """Residuals of each series around its own mean and the common profile, and the
    factor ``1 - 1/k_t`` each residual's variance keeps (positions held by one series
    only are dropped)."""
    width = max((len(s) for s in series), default=0)
    centred = [[x - statistics.fmean(s) for x in s] for s in series]
    held = [sum(1 for s in series if len(s) > t) for t in range(width)]
    profile = [statistics.fmean(c[t] for c in centred if len(c) > t) if held[t] else 0.0
               for t in range(width)]
    residuals, keeps = [], []
    for c in centred:
        used = [t for t in range(len(c)) if held[t] >= 2]
        residuals.append([c[t] - profile[t] for t in used])
        keeps.append([1 - 1 / held[t] for t in used])
    return residuals, keeps


def _moments(series: list[list[float]]) -> tuple[float, float, float | None] | None:
    """(a, b, raw lag-1 correlation) of the seconds by the moment equations, or None
    without a series of 2 seconds or more."""
    residuals, keeps = _profile(series)
    sum_d = sum_c = 0.0
    coef_d = [0.0, 0.0]  # E[ΣD] = coef_d[0]·a + coef_d[1]·b
    coef_c = [0.0, 0.0]
    for r, keep in zip(residuals, keeps, strict=True):
        n = len(r)
        if n < 2:
            continue
        mean = statistics.fmean(r)  # ~0; the series' own mean, as the equations assume
        dev = [x - mean for x in r]
        sum_d += sum(d * d / k for d, k in zip(dev, keep, strict=True))
        sum_c += sum(dev[t] * dev[t + 1] / min(keep[t], keep[t + 1]) for t in range(n - 1))
        coef_d[0] += n - 1
        coef_d[1] += -2 * (n - 1) / n
        # (n-1)b - (n+1)V + 2(a+b)/n with V = a/n + 2b(n-1)/n²
        coef_c[0] += -(n + 1) / n + 2 / n
        coef_c[1] += (n - 1) - 2 * (n + 1) * (n - 1) / n**2 + 2 / n
    if coef_d[0] == 0:
        return None
    raw = sum_c / sum_d if sum_d > 0 else None
    det = coef_d[0] * coef_c[1] - coef_d[1] * coef_c[0]
    if abs(det) < 1e-9 * coef_d[0] ** 2:  # only 2-second series: b cannot be told
        return sum_d / coef_d[0], 0.0, raw
    a = (sum_d * coef_c[1] - coef_d[1] * sum_c) / det
    b = (coef_d[0] * sum_c - coef_c[0] * sum_d) / det
    if a <= 0:  # what the seconds hold cannot be negative: no correlation then
        return max(sum_d / coef_d[0], 0.0), 0.0, raw
    return a, max(-RHO_LIMIT * a, min(RHO_LIMIT * a, b)), raw


def _within(series: list[list[float]]) -> tuple[float, float, float, float | None] | None:
    """(variance of a repeat's mean from its seconds, a, b, raw lag-1 correlation)."""
    moments = _moments(series)
    if moments is None:
        return None
    a, b, raw = moments
    var = statistics.fmean(a / len(x) + 2 * b * (len(x) - 1) / len(x) ** 2 for x in series)
    return max(var, 0.0), a, b, raw


def within_variance(series: Sequence[Sequence[float]]) -> float | None:
    """The variance of a repeat's mean (in TPS², not relative) that the per-second
    ``series`` of the repeats predict (step 1 and 2 of the module's docstring); None
    without a series of 2 seconds or more."""
    found = _within([_finite(x) for x in series if x])
    return None if found is None else found[0]


def _within_df(series: list[list[float]], var: float) -> float | None:
    """The degrees of freedom the within variance rests on, from its jackknife variance
    over the repeats (estimating the correlation of the seconds costs most of those the
    seconds seem to give: about a quarter of (k-1)(n-1) for 5-second repeats)."""
    k = len(series)
    if k < 3 or var <= 0:
        return None
    values = [w[0] for i in range(k)
              if (w := _within(series[:i] + series[i + 1:])) is not None]
    if len(values) < k:
        return None
    mean = statistics.fmean(values)
    spread = (k - 1) / k * sum((v - mean) ** 2 for v in values)
    return None if spread <= 0 else 2 * var * var / spread


def _finite(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values if math.isfinite(float(v))]


def noise_split(repeats: Sequence[Repeat], skip_first: int = 0) -> NoiseSplit:
    """The three parts of the noise of one cell whose measured ``repeats`` are given in
    the order they ran (by round). See the module's docstring for the estimators."""
    if skip_first < 0:
        raise ValueError("skip_first must be 0 or more")
    means = [float(r.mean) for r in repeats if math.isfinite(float(r.mean))]
    series = [s for r in repeats if math.isfinite(float(r.mean))
              if (s := _finite(r.seconds)[skip_first:])]
    k = len(means)
    center = statistics.fmean(means) if means else 0.0
    seconds = sum(len(s) for s in series)
    per_repeat = float(statistics.median(len(s) for s in series)) if series else None
    notes = []
    if k == 0 or center <= 0:
        return NoiseSplit(k, seconds, per_repeat, None, None, None, None, None, None, None,
                          "no measured repeat with a positive mean")
    found = _within(series)
    within = lag1 = raw = None
    if found is None:
        notes.append("no per-second samples, so no within part")
    else:
        var_within, a, b, raw = found
        within = math.sqrt(var_within) / center
        lag1 = b / a if a > 0 else None
    total = statistics.stdev(means) / center if k >= 2 else None
    if k < 3:
        notes.append("between and drift need 3 repeats or more")
        return NoiseSplit(k, seconds, per_repeat, within, None, None, total, None, lag1,
                          raw, "; ".join(notes))
    q = sum((y - x) ** 2 for x, y in itertools.pairwise(means)) / (2 * (k - 1))
    s2 = statistics.variance(means)
    drift = math.sqrt(max(s2 - q, 0.0)) / center
    between = (None if within is None
               else math.sqrt(max(q / center**2 - within**2, 0.0)))
    drift_p = (None if s2 == 0 else
               float(ndtr((q / s2 - 1) / math.sqrt((k - 2) / (k * k - 1)))))
    nu = 2 * (k - 1) ** 2 / (3 * k - 4)
    df_within = None if within is None else _within_df(series, (within * center) ** 2)
    between_p = (None if within is None or df_within is None else
                 float(fdtrc(nu, df_within, q / center**2 / within**2)))
    return NoiseSplit(k, seconds, per_repeat, within, between, drift, total,
                      math.sqrt(q) / center, lag1, raw, "; ".join(notes) or None,
                      between_p=between_p, drift_p=drift_p, within_df=df_within)


def pooled_split(splits: Sequence[NoiseSplit]) -> NoiseSplit | None:
    """Several cells' splits as one: each part's relative variance averaged with the
    weight of its cell's repeats less one (at least 1); a part any of them lacks is None
    (the first such cell's note says why). The p-values are the largest of the cells'
    (a part is there when every cell's own test says so). None without a split."""
    if not splits:
        return None
    weights = [max(s.repeats - 1, 1) for s in splits]

    def pool(name: str) -> float | None:
        values = [getattr(s, name) for s in splits]
        if any(v is None for v in values):
            return None
        return math.sqrt(sum(w * v * v for v, w in zip(values, weights, strict=True))
                         / sum(weights))

    def mean(name: str) -> float | None:
        pairs = [(v, w) for s, w in zip(splits, weights, strict=True)
                 if (v := getattr(s, name)) is not None]
        return sum(v * w for v, w in pairs) / sum(w for _, w in pairs) if pairs else None

    def largest(name: str) -> float | None:
        values = [getattr(s, name) for s in splits]
        return None if any(v is None for v in values) else max(values)

    lengths = [s.seconds_per_repeat for s in splits if s.seconds_per_repeat is not None]
    return NoiseSplit(
        repeats=sum(s.repeats for s in splits), seconds=sum(s.seconds for s in splits),
        seconds_per_repeat=float(statistics.median(lengths)) if lengths else None,
        within=pool("within"), between=pool("between"), drift=pool("drift"),
        total=pool("total"), short_term=pool("short_term"), lag1=mean("lag1"),
        lag1_raw=mean("lag1_raw"), note=next((s.note for s in splits if s.note), None),
        between_p=largest("between_p"), drift_p=largest("drift_p"),
        overhead_s=mean("overhead_s"))


# The shortest repeat advised: a repeat's first second carries the clients' start (the
# profile stats/variance.py takes out of the noise is still in the mean), and below
# 3 s it would be a third of every mean and more.
MIN_REPEAT_S = 3.0


@dataclass(frozen=True)
class RepeatLength:
    """The repeat length that narrows an interval fastest for the time spent, against
    the length run (:func:`repeat_length`). ``best_s`` None: no start-state part was
    measured, so longer is better as far as the budget goes. ``time_ratio``: the time
    repeats of ``best_s`` (or of any length, when None: the limit) need for the same
    interval, over the time repeats of ``now_s`` need."""

    now_s: float
    overhead_s: float
    best_s: float | None
    time_ratio: float


def repeat_length(split: NoiseSplit) -> RepeatLength | None:
    """The classic allocation of two-stage sampling, for a budget of time: a repeat of
    L measured seconds costs L + c (``overhead_s``: the reset, the recorders, storing
    it) and its mean varies by between² + σ₁²/L, σ₁² = within² · L_now the variance of
    one second's mean (the lag-1 correlation folded in). k = T / (L + c) repeats in a
    time T give the mean a variance of (between² + σ₁²/L)(L + c) / T, least at
    L* = σ₁ · √c / between: long repeats where the seconds are the noise and a repeat
    is dear, short ones where the start state is; not under :data:`MIN_REPEAT_S`. None
    where a part is not known.

    >>> r = repeat_length(NoiseSplit(9, 90, 10.0, 0.02, 0.05, 0.0, None, None, None, None,
    ...                              None, overhead_s=10.0))
    >>> round(r.best_s, 2), round(r.time_ratio, 2)
    (4.0, 0.84)
    """
    now, c = split.seconds_per_repeat, split.overhead_s
    if split.within is None or split.between is None or not now or c is None or c < 0:
        return None
    per_second = split.within ** 2 * now
    start = split.between ** 2

    def cost(length: float) -> float:
        return (start + per_second / length) * (length + c)

    if start <= 0:  # the cost falls towards per_second as L grows: no best length
        return RepeatLength(now, c, None, per_second / cost(now) if cost(now) else 1.0)
    best = max(MIN_REPEAT_S, math.sqrt(per_second * c / start))
    return RepeatLength(now, c, best, cost(best) / cost(now))
