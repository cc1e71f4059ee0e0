"""What a link does to the packets crossing it: delay, jitter, loss and rate.

A :class:`LinkProfile` describes one point-to-point link and applies to each direction on its
own: ``delay_ms`` is the one-way delay, so a request and its answer take ``2 x delay_ms``
more than on a bare link, and ``loss_pct`` is the chance that a packet in one direction is
lost. Rates use tc's units (``1gbit``, ``100mbit``, ``500kbit``, ``10mbps`` = 10 megabytes a
second), read without regard to case as tc does; a bare number is refused, because tc and
people disagree on whether it means bits or bytes.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

from syncrep_lab.errors import UserError

MAX_DELAY_MS = 60_000.0  # a minute; longer is no longer a network but an outage
MIN_RATE = 8_000  # bits/s; below this one full-size packet takes more than a second and a half
MAX_RATE = 400 * 10**9  # bits/s; a veth pair moves far less, so a higher limit limits nothing

# tc's rate units, in bits per second (iproute2's tc/tc_util.c), matched without case.
_UNITS: dict[str, float] = {
    "bit": 1.0, "kibit": 1024.0, "kbit": 1e3, "mibit": 1024.0**2, "mbit": 1e6,
    "gibit": 1024.0**3, "gbit": 1e9, "tibit": 1024.0**4, "tbit": 1e12,
    "bps": 8.0, "kibps": 8 * 1024.0, "kbps": 8e3, "mibps": 8 * 1024.0**2, "mbps": 8e6,
    "gibps": 8 * 1024.0**3, "gbps": 8e9, "tibps": 8 * 1024.0**4, "tbps": 8e12,
}
_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)(/s)?\s*$", re.IGNORECASE)
_EXAMPLES = "write it as tc does, e.g. 1gbit, 100mbit, 500kbit or 10mbps (bytes/s)"


def parse_rate(text: str) -> int:
    """A link rate in tc's notation, as bits per second. Raises :class:`UserError` for
    garbage, a missing or unknown unit, zero, and rates too small or too large to mean
    anything on an emulated link."""
    if not isinstance(text, str):
        raise UserError(f"link rate {text!r} is not text", _EXAMPLES)
    match = _RATE.match(text)
    if text.strip().startswith("-"):
        raise UserError(f"link rate {text!r} is negative", _EXAMPLES)
    if match is None:
        raise UserError(f"link rate {text!r} is not a number followed by a unit", _EXAMPLES)
    number, unit, per_second = match.groups()
    unit = unit.lower()
    if float(number) == 0:
        raise UserError(f"a link rate of 0 ({text!r}) would carry nothing: every connection "
                        "over it would hang",
                        "give a positive rate, or leave the rate out for an unlimited link")
    if not unit:
        raise UserError(f"link rate {text!r} has no unit (tc would read bits per second, "
                        "which is rarely what was meant)", _EXAMPLES)
    if unit not in _UNITS or (per_second and not unit.endswith("bit")):
        raise UserError(f"link rate {text!r} has an unknown unit {unit + (per_second or '')!r}",
                        _EXAMPLES)
    bits = float(number) * _UNITS[unit]
    if bits < MIN_RATE:
        raise UserError(f"link rate {text!r} is below 8 kbit/s: a single full-size packet "
                        "would take more than a second and a half",
                        "give at least 8kbit, or leave the rate out for an unlimited link")
    if bits > MAX_RATE or not math.isfinite(bits):
        raise UserError(f"link rate {text!r} is above 400 Gbit/s, far more than an emulated "
                        "link can carry, so it would limit nothing",
                        "leave the rate out for an unlimited link")
    return round(bits)


def format_rate(bits: int) -> str:
    """``1 Gbit/s``, ``100 Mbit/s``, ``500 kbit/s``, ``80 Mbit/s``."""
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bits >= scale:
            return f"{bits / scale:.4g} {unit}"
    return f"{bits} bit/s"


@dataclass(frozen=True)
class LinkProfile:
    """The behaviour of one link, the same in both directions."""

    delay_ms: float = 0.0  # one way, applied to each direction (round trip = 2 x delay_ms)
    jitter_ms: float = 0.0  # each packet's delay varies uniformly within +- jitter_ms
    loss_pct: float = 0.0  # chance that a packet is lost, per direction
    rate: str | None = None  # tc notation ("1gbit", "100mbit", "10mbps"); None = unlimited

    @property
    def empty(self) -> bool:
        """True when the link is left as a bare veth pair."""
        return not (self.delay_ms or self.jitter_ms or self.loss_pct or self.rate)

    @property
    def delays(self) -> bool:
        """True when packets must be held back or dropped (delay, jitter or loss)."""
        return bool(self.delay_ms or self.jitter_ms or self.loss_pct)

    def rate_bits(self) -> int | None:
        return None if self.rate is None else parse_rate(self.rate)

    def describe(self) -> str:
        """``0.2 ms, 1 Gbit/s``; ``2 ms ± 0.5 ms, 1% loss``; ``no delay`` for a bare link."""
        parts = []
        if self.delay_ms or self.jitter_ms:
            text = f"{self.delay_ms:g} ms"
            if self.jitter_ms:
                text += f" ± {self.jitter_ms:g} ms"
            parts.append(text)
        else:
            parts.append("no delay")
        if self.loss_pct:
            parts.append(f"{self.loss_pct:g}% loss")
        if self.rate is not None:
            try:
                parts.append(format_rate(parse_rate(self.rate)))
            except UserError:
                parts.append(f"rate {self.rate!r}")
        return ", ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> LinkProfile:
        """The inverse of :meth:`to_json`; a :class:`UserError` names what is malformed."""
        fix = "give delay_ms, jitter_ms and loss_pct as numbers and rate as text such as 100mbit"
        if not isinstance(data, dict):
            raise UserError(f"a link profile must be a table of settings, not {data!r}", fix)
        unknown = sorted(set(data) - {"delay_ms", "jitter_ms", "loss_pct", "rate"})
        if unknown:
            raise UserError(f"unknown link setting(s): {', '.join(map(str, unknown))}", fix)
        values: dict[str, Any] = {}
        for key in ("delay_ms", "jitter_ms", "loss_pct"):
            value = data.get(key, 0.0)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise UserError(f"link {key} must be a number, not {value!r}", fix)
            values[key] = float(value)
        rate = data.get("rate")
        if rate is not None and not isinstance(rate, str):
            raise UserError(f"link rate must be text such as '100mbit', not {rate!r}", fix)
        profile = cls(rate=rate, **values)
        problems = check_profile(profile)
        if problems:
            raise UserError("; ".join(problems), "correct the link settings")
        return profile


def check_profile(p: LinkProfile) -> list[str]:
    """Everything wrong with a profile, one message each (an empty list when it is fine).
    Jitter larger than the delay is allowed: a packet's delay is then clipped at zero."""
    problems = []
    for name, value in (("delay", p.delay_ms), ("jitter", p.jitter_ms)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(f"link {name} {value!r} is not a number of milliseconds")
        elif not math.isfinite(value) or value < 0:
            problems.append(f"link {name} {value} ms is negative or not a number: "
                            "give 0 or more milliseconds")
        elif value > MAX_DELAY_MS:
            problems.append(f"link {name} {value:g} ms is above {MAX_DELAY_MS:g} ms (a minute)")
    loss = p.loss_pct
    if isinstance(loss, bool) or not isinstance(loss, int | float):
        problems.append(f"link loss {loss!r} is not a percentage")
    elif not (math.isfinite(loss) and 0 <= loss <= 100):
        problems.append(f"link loss {loss:g} % is outside 0..100 (it is a percentage of "
                        "packets, per direction)")
    if p.rate is not None:
        try:
            parse_rate(p.rate)
        except UserError as exc:
            problems.append(exc.cause)
    return problems
