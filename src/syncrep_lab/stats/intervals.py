"""Small-sample statistics for repeated benchmark runs.

This module owns how run-to-run variation is summarised and compared: a mean
with its Student-t confidence interval (:func:`mean_ci`; a rate's, such as TPS, on the
log scale: :func:`rate_ci`), the question "is that
interval narrow enough yet" (:func:`ci_within`), Welch's unequal-variance t-test
(:func:`welch_t`), a confidence interval for a ratio of means
(:func:`ratio_ci`), the smallest change an interval lets a test see
(:func:`detectable_effect`), and how much of one series another explains
(:func:`pearson`). Benchmarks give a handful of runs, not thousands, so every
interval uses the t distribution rather than the normal one, and anything
undefined for so few values (a spread from one run) is None rather than a
made-up number.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# Student's t through scipy.special (a quarter of a second to import) rather than
# scipy.stats (a second): every command that touches a store imports this module.
from scipy.special import ndtri, stdtr, stdtrit

__all__ = ["Correlation", "MeanCI", "PairedRatio", "RatioCI", "Trend", "WelchResult",
           "ci_within", "detectable_effect", "mean_ci", "paired_ratio", "pearson",
           "rate_ci", "ratio_ci", "rounds_for", "share_interval", "stein_rounds", "t_ppf", "t_sf",
           "trend", "welch_t"]


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be within (0, 1), got {confidence}")


def t_ppf(q: float, df: float) -> float:
    """Student's t quantile: ``scipy.stats.t.ppf(q, df)``."""
    return float(stdtrit(df, q))


def t_sf(x: float, df: float) -> float:
    """Student's t upper tail: ``scipy.stats.t.sf(x, df)``."""
    return float(stdtr(df, -x))


def _t_quantile(confidence: float, df: float) -> float:
    return t_ppf((1 + confidence) / 2, df)


def _checked(values: Sequence[float], name: str) -> list[float]:
    floats = [float(v) for v in values]
    if not floats:
        raise ValueError(f"{name}: at least one value is needed")
    if not all(math.isfinite(v) for v in floats):
        raise ValueError(f"{name}: values must be finite")
    return floats


@dataclass(frozen=True)
class MeanCI:
    """A sample mean and its two-sided t confidence interval.

    ``stdev`` (ddof=1), ``low``, ``high`` and ``half_width_rel`` are None with
    fewer than 2 values; ``half_width_rel`` (half width / |mean|) is also None
    when the mean is 0.
    """

    n: int
    mean: float
    stdev: float | None
    low: float | None
    high: float | None
    half_width_rel: float | None


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> MeanCI:
    """Mean of ``values`` with a Student-t interval: mean ± t(n-1) · s / √n."""
    _check_confidence(confidence)
    data = _checked(values, "values")
    n = len(data)
    mean = statistics.fmean(data)
    if n < 2:
        return MeanCI(n=n, mean=mean, stdev=None, low=None, high=None, half_width_rel=None)
    stdev = statistics.stdev(data)
    half = _t_quantile(confidence, n - 1) * stdev / math.sqrt(n)
    return MeanCI(
        n=n,
        mean=mean,
        stdev=stdev,
        low=mean - half,
        high=mean + half,
        half_width_rel=None if mean == 0 else half / abs(mean),
    )


def rate_ci(values: Sequence[float], confidence: float = 0.95, *,
            t: float | None = None) -> MeanCI:
    """Mean of a rate (TPS: never below zero, its spread growing with its level) with
    its interval taken on the log scale, as the stopping rule and the ratios take
    theirs: h = t(n-1) · s(log values) / √n, and the interval mean · e^∓h. It cannot
    reach below zero, where mean ± t · s / √n of two repeats far apart did; its
    ``half_width_rel`` is e^h - 1, the figure the stopping rule holds to ``ci_target``.
    ``stdev`` is the values' own. ``t``: the quantile to use instead of the one of
    ``confidence`` (a stored interval's, read back from it). A value that is not
    above zero has no log: then the mean's t interval, cut at zero.

    >>> ci = rate_ci([9000.0, 11000.0])
    >>> round(ci.low), round(ci.high), round(ci.half_width_rel, 3)
    (2795, 35783, 2.578)
    >>> mean_ci([9000.0, 11000.0]).low < 0
    True
    """
    _check_confidence(confidence)
    data = _checked(values, "values")
    n = len(data)
    if n < 2:
        return mean_ci(data, confidence)
    quantile = _t_quantile(confidence, n - 1) if t is None else t
    mean, stdev = statistics.fmean(data), statistics.stdev(data)
    if min(data) <= 0:
        half = quantile * stdev / math.sqrt(n)
        return MeanCI(n=n, mean=mean, stdev=stdev, low=max(0.0, mean - half),
                      high=mean + half, half_width_rel=None if mean == 0 else half / mean)
    h = quantile * statistics.stdev([math.log(v) for v in data]) / math.sqrt(n)
    return MeanCI(n=n, mean=mean, stdev=stdev, low=mean * math.exp(-h),
                  high=mean * math.exp(h), half_width_rel=math.expm1(h))


def ci_within(values: Sequence[float], target_rel: float, confidence: float = 0.95) -> bool:
    """Whether the interval's half width is at most ``target_rel`` of the mean
    (e.g. 0.02 for ±2 %). False with fewer than 2 values: one run says nothing
    about the spread."""
    if len(values) < 2:
        return False
    rel = mean_ci(values, confidence).half_width_rel
    return rel is not None and rel <= target_rel


@dataclass(frozen=True)
class WelchResult:
    """Welch's t-test of mean(a) against mean(b): two-sided, unequal variances."""

    t: float
    df: float
    p_value: float
    significant: bool


def welch_t(a: Sequence[float], b: Sequence[float], alpha: float = 0.05) -> WelchResult:
    """Welch's unequal-variance t-test, as ``scipy.stats.ttest_ind(equal_var=False)``.

    Each sample needs at least 2 values. When neither sample varies the
    statistic is undefined (0/0 or x/0); the answer is then exact instead:
    p = 0 (t = ±inf) if the means differ and p = 1 (t = 0) if they are equal,
    with df = n_a + n_b - 2.
    """
    xa, xb = _checked(a, "a"), _checked(b, "b")
    na, nb = len(xa), len(xb)
    if na < 2 or nb < 2:
        raise ValueError("welch_t needs at least 2 values in each sample")
    mean_a, mean_b = statistics.fmean(xa), statistics.fmean(xb)
    va, vb = statistics.variance(xa) / na, statistics.variance(xb) / nb
    diff = mean_a - mean_b
    if va + vb == 0:
        df = float(na + nb - 2)
        if diff == 0:
            return WelchResult(t=0.0, df=df, p_value=1.0, significant=False)
        return WelchResult(t=math.copysign(math.inf, diff), df=df, p_value=0.0, significant=True)
    t = diff / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    p_value = 2 * t_sf(abs(t), df)
    return WelchResult(t=t, df=df, p_value=p_value, significant=p_value < alpha)


@dataclass(frozen=True)
class RatioCI:
    """mean(a) / mean(b) with a confidence interval (None when a sample has < 2 values),
    its standard error and Welch–Satterthwaite degrees of freedom (None likewise)."""

    ratio: float
    low: float | None
    high: float | None
    se: float | None = None
    df: float | None = None


def ratio_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> RatioCI:
    """Ratio of means R = mean(a) / mean(b), for independent samples a and b.

    Method: first-order delta method. With ``d_a = var(a) / (n_a · mean(b)²)``
    and ``d_b = R² · var(b) / (n_b · mean(b)²)`` (sample variances, ddof=1) the
    standard error of R is ``√(d_a + d_b)``. The interval is ``R ± t · se`` with
    t from Student's distribution at the Welch–Satterthwaite degrees of freedom
    ``(d_a + d_b)² / (d_a²/(n_a-1) + d_b²/(n_b-1))``, so that a handful of runs
    gives a suitably wide interval. The approximation is good when both means
    are measured to a few percent; it is symmetric and can misbehave when
    mean(b) is itself uncertain near 0 (Fieller's interval would be the tool
    then). mean(b) = 0 raises ValueError; low and high are None when a sample
    has fewer than 2 values.
    """
    _check_confidence(confidence)
    xa, xb = _checked(a, "a"), _checked(b, "b")
    mean_a, mean_b = statistics.fmean(xa), statistics.fmean(xb)
    if mean_b == 0:
        raise ValueError("ratio_ci: mean(b) is 0, the ratio is undefined")
    ratio = mean_a / mean_b
    na, nb = len(xa), len(xb)
    if na < 2 or nb < 2:
        return RatioCI(ratio=ratio, low=None, high=None)
    da = statistics.variance(xa) / (na * mean_b**2)
    db = ratio**2 * statistics.variance(xb) / (nb * mean_b**2)
    if da + db == 0:
        return RatioCI(ratio=ratio, low=ratio, high=ratio, se=0.0, df=float(na + nb - 2))
    se = math.sqrt(da + db)
    df = (da + db) ** 2 / (da**2 / (na - 1) + db**2 / (nb - 1))
    half = _t_quantile(confidence, df) * se
    return RatioCI(ratio=ratio, low=ratio - half, high=ratio + half, se=se, df=df)


def detectable_effect(se: float, df: float, confidence: float = 0.95, power: float = 0.80
                      ) -> float:
    """The smallest true change a two-sided t test at ``confidence`` detects with
    probability ``power``, for an estimate with standard error ``se`` on ``df`` degrees
    of freedom: (t(1 - α/2, df) + t(power, df)) · se, in the units of ``se`` (for the
    standard error of a log ratio, about the relative change: 0.05 is ±5 %).

    The test rejects when |estimate| > t(1 - α/2) · se; a true change of that much plus
    t(power) · se puts the estimate beyond it with probability ``power`` (the far tail
    neglected, the se taken as known: the usual approximation, slightly optimistic for
    few degrees of freedom). An interval that holds "no change" says little about a
    change smaller than this: the run could not have seen it.

    >>> round(detectable_effect(0.01, 9), 5)  # (2.26216 + 0.88340) · 0.01
    0.03146
    """
    _check_confidence(confidence)
    if not 0 < power < 1:
        raise ValueError(f"power must be within (0, 1), got {power}")
    if se < 0 or not math.isfinite(se):
        raise ValueError(f"se must be finite and not negative, got {se}")
    if not df > 0:
        raise ValueError(f"df must be positive, got {df}")
    return (_t_quantile(confidence, df) + t_ppf(power, df)) * se


@dataclass(frozen=True)
class Correlation:
    """Pearson's r of paired values, and the two-sided p of r = 0."""

    n: int
    r: float
    p_value: float

    @property
    def r2(self) -> float:
        """The share of one series' variance a straight line in the other explains."""
        return self.r * self.r


def pearson(x: Sequence[float], y: Sequence[float]) -> Correlation | None:
    """Pearson's r of ``x`` and ``y`` with its p value, as ``scipy.stats.pearsonr``: the
    t test of r = 0 on n − 2 degrees of freedom, t = r·√((n − 2) / (1 − r²)) (which is
    what pearsonr's beta distribution is), here through scipy.special, as this module's
    other tests are. None below 3 pairs, or when a series does not vary (r is 0/0).

    >>> c = pearson([1, 2, 3, 4], [1, 3, 2, 4])  # sxy = 4, sxx = syy = 5: r = 0.8
    >>> round(c.r, 12), round(c.r2, 12), round(c.p_value, 4)
    (0.8, 0.64, 0.2)
    """
    xs, ys = _checked(x, "x"), _checked(y, "y")
    if len(xs) != len(ys):
        raise ValueError(f"x and y differ in length: {len(xs)} and {len(ys)}")
    n = len(xs)
    if n < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((a - mx) ** 2 for a in xs)
    syy = sum((b - my) ** 2 for b in ys)
    if sxx == 0 or syy == 0:
        return None
    sxy = sum((a - mx) * (b - my) for a, b in zip(xs, ys, strict=True))
    r = max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))
    if abs(r) == 1.0:
        return Correlation(n, r, 0.0)
    t = abs(r) * math.sqrt((n - 2) / (1 - r * r))
    return Correlation(n, r, min(1.0, 2 * t_sf(t, n - 2)))


def share_interval(share: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """An interval for a share of time, ``share`` the mean over ``n`` independent
    observations each between 0 and 1 (the sampler's ticks: at each, the fraction of a
    role's processes in some wait): Wilson's score interval with ``n`` trials.

    Wilson's interval is for n yes/no trials, whose variance p(1 - p) is the largest any
    value between 0 and 1 with mean p can have; a tick's fraction of 64 backends varies
    less than that, so the interval is wide rather than narrow whatever the backends do
    together at one tick. It is also the interval of the sampler alone: what differs
    between repeats (the state each starts from) widens it further where several repeats
    were sampled (the caller takes the wider of this and their spread).

    >>> [round(x, 4) for x in share_interval(0.3, 100)]
    [0.2189, 0.3958]
    >>> share_interval(0.0, 0)
    (0.0, 1.0)
    """
    _check_confidence(confidence)
    if not 0 <= share <= 1:
        raise ValueError(f"share must be within [0, 1], got {share}")
    if n <= 0:
        return 0.0, 1.0
    z = float(stdtrit(math.inf, (1 + confidence) / 2))
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class PairedRatio:
    """A ratio estimated from pairs taken side by side (a cell and its baseline in the
    same round): the geometric mean of the per-pair ratios, with a t interval on the
    log scale carried back (``low``/``high`` None with fewer than 2 pairs)."""

    rounds: int
    mean: float
    low: float | None
    high: float | None
    log_sd: float | None  # the spread of the log ratios (ddof=1)

    @property
    def log_se(self) -> float | None:
        """The standard error of the mean log ratio (on ``rounds - 1`` degrees of
        freedom)."""
        return None if self.log_sd is None else self.log_sd / math.sqrt(self.rounds)

    @property
    def half_width_rel(self) -> float | None:
        """The interval's larger distance from the ratio, relative to it."""
        if self.low is None or self.high is None:
            return None
        return max(self.high / self.mean - 1, 1 - self.low / self.mean)


def paired_ratio(a: Sequence[float], b: Sequence[float], confidence: float = 0.95
                 ) -> PairedRatio:
    """a[i] / b[i] over pairs measured together, as ``exp(mean ± t · sd / √n)`` of the
    log ratios. Logs, because a ratio's errors multiply: the interval is symmetric in
    log space, so A/B and B/A get intervals that are each other's inverse."""
    _check_confidence(confidence)
    xa, xb = _checked(a, "a"), _checked(b, "b")
    if len(xa) != len(xb):
        raise ValueError("paired_ratio: a and b must pair up")
    if any(v <= 0 for v in (*xa, *xb)):
        raise ValueError("paired_ratio: values must be positive")
    logs = [math.log(x / y) for x, y in zip(xa, xb, strict=True)]
    ci = mean_ci(logs, confidence)
    if ci.low is None or ci.high is None:
        return PairedRatio(len(logs), math.exp(ci.mean), None, None, None)
    return PairedRatio(len(logs), math.exp(ci.mean), math.exp(ci.low), math.exp(ci.high),
                       ci.stdev)


def stein_rounds(pilot: Sequence[float], half_width: float, confidence: float = 0.95) -> int:
    """How many values in all give a ±``half_width`` interval for the mean of a series
    whose first values are ``pilot`` (Stein's two-stage procedure, 1945).

    The count depends on the pilot's spread only: N = max(n0, ⌈(t(n0-1) · s0 / d)²⌉).
    Because the later values do not move N, the interval mean ± d over all N values
    covers the true mean with at least the asked confidence, however the looks fall;
    stopping at the first narrow interval instead biases it (a lucky pair of values
    that agree by chance). Needs at least 2 pilot values."""
    _check_confidence(confidence)
    data = _checked(pilot, "pilot")
    n0 = len(data)
    if n0 < 2:
        raise ValueError("stein_rounds: at least 2 pilot values are needed")
    if half_width <= 0:
        raise ValueError("stein_rounds: half_width must be positive")
    s0 = statistics.stdev(data)
    return max(n0, math.ceil((_t_quantile(confidence, n0 - 1) * s0 / half_width) ** 2))


ROUNDS_FOR_LIMIT = 100_000  # beyond this, "more rounds" is no answer: None


def rounds_for(sd: float, half_width: float, confidence: float = 0.95) -> int | None:
    """The fewest values whose mean has a ±``half_width`` t interval when they spread by
    ``sd``: the least n ≥ 2 with t(n-1) · sd / √n ≤ half_width, the degrees of freedom
    growing with n (unlike Stein's N, which keeps its pilot's). What a series seen so
    far asks for, not a promise: ``sd`` is itself an estimate. None beyond
    ROUNDS_FOR_LIMIT.

    >>> rounds_for(0.10, 0.03)  # z alone would say 43; t(n-1) asks for a few more
    46
    >>> rounds_for(0.01, 0.03)
    3
    """
    _check_confidence(confidence)
    if sd < 0 or not math.isfinite(sd) or half_width <= 0:
        raise ValueError(f"rounds_for: sd {sd} and half_width {half_width} do not make "
                         "a target")
    z = float(ndtri(0.5 + confidence / 2))
    n = max(2, math.ceil((z * sd / half_width) ** 2))  # t > z: never fewer than this
    while n <= ROUNDS_FOR_LIMIT:
        if _t_quantile(confidence, n - 1) * sd / math.sqrt(n) <= half_width:
            return n
        n += 1
    return None


@dataclass(frozen=True)
class Trend:
    """A straight line through a series against its position: the change per step
    relative to the series' mean, with its t interval."""

    per_step_rel: float
    low: float
    high: float

    @property
    def significant(self) -> bool:
        return self.low > 0 or self.high < 0


def trend(values: Sequence[float], confidence: float = 0.95) -> Trend | None:
    """Least-squares slope of ``values`` against 0, 1, 2, ... (None below 3 values or
    with a zero mean)."""
    _check_confidence(confidence)
    data = _checked(values, "values")
    n = len(data)
    mean = statistics.fmean(data)
    if n < 3 or mean == 0:
        return None
    xs = range(n)
    mx = (n - 1) / 2
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - mean) for x, y in zip(xs, data, strict=True)) / sxx
    residuals = [y - (mean + slope * (x - mx)) for x, y in zip(xs, data, strict=True)]
    se = math.sqrt(sum(r * r for r in residuals) / (n - 2) / sxx)
    half = _t_quantile(confidence, n - 2) * se
    return Trend(slope / abs(mean), (slope - half) / abs(mean), (slope + half) / abs(mean))
