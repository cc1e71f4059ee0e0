"""How figures are written: one function per kind of figure (a TPS, a time, a share, a
ratio), for the terminal, the report's page and the sentences analysis makes, so that a
figure reads the same wherever it is printed. None (not measured) reads "-" on a
terminal and "–" on the page; an unbounded ceiling (∞) reads "unbounded" or "∞"."""

from __future__ import annotations

import math
from collections.abc import Mapping


def number(value: float | None, pattern: str = "{:,.0f}") -> str:
    """A figure for a table cell, "-" when there is none."""
    return "-" if value is None else pattern.format(value)


def tps(value: float | None) -> str:
    """Transactions a second, whole: '12,345'; a ceiling with no bound 'unbounded'."""
    return "unbounded" if value is None or not math.isfinite(value) else f"{value:,.0f}"


def tps_short(value: float | None) -> str:
    """Transactions a second in a sentence: '12k' from 10,000 up, '9,876' below."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return "unbounded"
    return f"{value / 1000:,.0f}k" if value >= 10_000 else f"{value:,.0f}"


def duration(seconds: float) -> str:
    """A wall time in a sentence: '45 s', '4 min 10 s', '2 h 5 min'.

    >>> duration(44.6), duration(250), duration(7500)
    ('45 s', '4 min 10 s', '2 h 5 min')
    """
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        m, s = divmod(whole, 60)
        return f"{m} min {s} s" if s else f"{m} min"
    h, m = divmod(round(whole / 60), 60)
    return f"{h} h {m} min" if m else f"{h} h"


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def us(value: float | None) -> str:
    """µs (or any demand) to a tenth, ∞ where unbounded."""
    return "∞" if value is None or value == math.inf else f"{value:,.1f}"


def amount(value: float | None) -> str:
    """µs or waiters, to a precision that suits their size."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}" if abs(value) >= 10 \
        else f"{value:.2f}"


def figure(value: float | None, digits: int = 1) -> str:
    """A figure to ``digits`` decimals, whole from 1,000 up."""
    if value is None:
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def mean_pm(ci: Mapping[str, object], digits: int = 1) -> str:
    """A mean ± the half width of its interval: '12.3±0.4' (from any mapping with mean,
    low and high, each a number or None)."""
    mean, low, high = ci.get("mean"), ci.get("low"), ci.get("high")
    if not isinstance(mean, int | float):
        return "-"
    if not isinstance(low, int | float) or not isinstance(high, int | float):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f}±{(high - low) / 2:.{digits}f}"


def change(ratio: float | None, unit: str = " %") -> str:
    """B/A as a signed change: 0.65 -> '-35 %'."""
    return "?" if ratio is None else f"{100 * (ratio - 1):+.0f}{unit}"


def times(ratio: float | None, low: float | None = None, high: float | None = None) -> str:
    """B/A as a factor, with its interval where it has one: 'x0.93 [0.88, 0.98]'."""
    if ratio is None:
        return ""
    if low is None or high is None:
        return f"x{float(ratio):.2f}"
    return f"x{float(ratio):.2f} [{float(low):.2f}, {float(high):.2f}]"


def share(value: float) -> str:
    """A share as a percentage without its sign: a tenth below 10, whole above."""
    return f"{100 * value:.1f}" if 100 * value < 10 else f"{100 * value:.0f}"


def page_number(value: object, digits: int = 0) -> str:
    """The report page's figure ('–' where there is none; text as it is)."""
    if value is None:
        return "–"
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}"
    return str(value)


def page_pct(value: float | None, digits: int = 1) -> str:
    """The report page's share as a percentage: 0.123 -> '12.3 %'."""
    return "–" if value is None else f"{100 * float(value):.{digits}f} %"
