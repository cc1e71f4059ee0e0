"""Latency histograms: a log-linear bucket scheme over integer microseconds.

This module owns :class:`LatencyHistogram`, the one place latencies are
aggregated. The scheme follows HdrHistogram's idea: values below 128 get one
bucket each, and every power-of-two range above that is split into 64 equal
buckets, so any bucket is at most 1/64 of its lower bound wide. A fixed array of
2496 counters then covers 0 µs to 2**44 - 1 µs (about 200 days), which is why a
histogram costs the same memory for ten transactions or ten billion, merges by
adding arrays, and serialises to a few hundred bytes.

``count``, ``total``, ``min`` and ``max`` are kept exactly beside the buckets,
so the mean and the extremes carry no bucketing error at all.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["MAX_VALUE", "LatencyHistogram", "bucket_range"]

_SUB_BITS = 6  # 64 sub-buckets per power of two: bucket width <= 1/64 of its lower bound
_SUB = 1 << _SUB_BITS
_VALUE_BITS = 44
MAX_VALUE = (1 << _VALUE_BITS) - 1
"""Largest recordable value in µs; larger values are clamped to it."""

_MAX_SHIFT = _VALUE_BITS - (_SUB_BITS + 1)
_SIZE = _MAX_SHIFT * _SUB + 2 * _SUB

_MAGIC = b"SRLH"
_FORMAT_VERSION = 1
_HEAD = struct.Struct("<4sB")
_BODY_HEAD = struct.Struct("<QqqHH")


def _bucket_bounds() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    index = np.arange(_SIZE, dtype=np.int64)
    shift = np.maximum(index // _SUB - 1, 0)
    mantissa = index - shift * _SUB
    return mantissa << shift, np.int64(1) << shift


_LOWS, _WIDTHS = _bucket_bounds()
# Midpoint of the integers a bucket holds; for the exact buckets this is the value itself.
_MIDS: npt.NDArray[np.float64] = _LOWS + (_WIDTHS - 1) / 2.0


def bucket_range(index: int) -> tuple[int, int]:
    """The smallest and the largest value bucket ``index`` holds.

    >>> bucket_range(5), bucket_range(128), bucket_range(129)
    ((5, 5), (128, 129), (130, 131))
    """
    if not 0 <= index < _SIZE:
        raise ValueError(f"bucket {index} is not of this scheme")
    return int(_LOWS[index]), int(_LOWS[index] + _WIDTHS[index] - 1)


def _index_of(value: int) -> int:
    shift = max(value.bit_length() - (_SUB_BITS + 1), 0)
    return shift * _SUB + (value >> shift)


def _indices_of(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    # frexp's exponent equals bit_length for positive integers and is exact here
    # because every value fits in float64's 53-bit mantissa.
    bit_length = np.frexp(values.astype(np.float64))[1].astype(np.int64)
    shift = np.maximum(bit_length - (_SUB_BITS + 1), 0)
    indices: npt.NDArray[np.int64] = shift * _SUB + (values >> shift)
    return indices


def _exact_sum(values: npt.NDArray[np.int64], largest: int) -> int:
    if largest == 0:
        return 0
    # int64 sums overflow silently, so sum in blocks small enough never to overflow.
    block = max((2**63 - 1) // largest, 1)
    if block >= values.size:
        return int(values.sum())
    return sum(int(values[i : i + block].sum()) for i in range(0, values.size, block))


class LatencyHistogram:
    """Counts of integer-µs latencies in log-linear buckets, plus exact count/total/min/max."""

    __slots__ = ("_count", "_counts", "_max", "_min", "_total")

    def __init__(self) -> None:
        self._counts: npt.NDArray[np.int64] = np.zeros(_SIZE, dtype=np.int64)
        self._count = 0
        self._total = 0
        self._min: int | None = None
        self._max: int | None = None

    @property
    def count(self) -> int:
        """Number of recorded values."""
        return self._count

    @property
    def total(self) -> int:
        """Exact sum of recorded values in µs."""
        return self._total

    @property
    def min(self) -> int | None:
        """Exact smallest recorded value, None when empty."""
        return self._min

    @property
    def max(self) -> int | None:
        """Exact largest recorded value, None when empty."""
        return self._max

    @property
    def counts(self) -> npt.NDArray[np.int64]:
        """A read-only view of the bucket counters."""
        view = self._counts.view()
        view.flags.writeable = False
        return view

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return (
            f"LatencyHistogram(count={self._count}, min={self._min}, "
            f"max={self._max}, mean={self.mean()})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LatencyHistogram):
            return NotImplemented
        return (
            self._count == other._count
            and self._total == other._total
            and self._min == other._min
            and self._max == other._max
            and bool(np.array_equal(self._counts, other._counts))
        )

    def _note_extremes(self, low: int, high: int) -> None:
        self._min = low if self._min is None else min(self._min, low)
        self._max = high if self._max is None else max(self._max, high)

    def record(self, value: int) -> None:
        """Record one latency in µs (clamped to :data:`MAX_VALUE`)."""
        value = int(value)
        if value < 0:
            raise ValueError(f"latency must be >= 0 µs, got {value}")
        value = min(value, MAX_VALUE)
        self._counts[_index_of(value)] += 1
        self._count += 1
        self._total += value
        self._note_extremes(value, value)

    def record_array(self, values: npt.NDArray[Any]) -> None:
        """Record every element of an integer array of µs latencies, without a Python loop."""
        array = np.asarray(values).ravel()
        if array.size == 0:
            return
        if not np.issubdtype(array.dtype, np.integer):
            raise TypeError(f"latencies must be integers, got dtype {array.dtype}")
        low = int(array.min())
        if low < 0:
            raise ValueError(f"latency must be >= 0 µs, got {low}")
        high = int(array.max())
        if high > MAX_VALUE:
            array = np.minimum(array, MAX_VALUE)
            high = MAX_VALUE
        clean = array.astype(np.int64, copy=False)
        self._counts += np.bincount(_indices_of(clean), minlength=_SIZE)
        self._count += int(clean.size)
        self._total += _exact_sum(clean, high)
        self._note_extremes(min(low, MAX_VALUE), high)

    def merge(self, other: LatencyHistogram) -> None:
        """Add another histogram's values into this one; exact, as if recorded here."""
        if other._count == 0:
            return
        self._counts += other._counts
        self._count += other._count
        self._total += other._total
        assert other._min is not None and other._max is not None
        self._note_extremes(other._min, other._max)

    def copy(self) -> LatencyHistogram:
        """An independent histogram holding the same values."""
        twin = LatencyHistogram()
        twin.merge(self)
        return twin

    def __add__(self, other: LatencyHistogram) -> LatencyHistogram:
        if not isinstance(other, LatencyHistogram):
            return NotImplemented
        result = self.copy()
        result.merge(other)
        return result

    def __iadd__(self, other: LatencyHistogram) -> LatencyHistogram:
        if not isinstance(other, LatencyHistogram):
            return NotImplemented
        self.merge(other)
        return self

    def mean(self) -> float | None:
        """Exact mean in µs (total / count), None when empty."""
        if self._count == 0:
            return None
        return self._total / self._count

    def percentile(self, p: float) -> float | None:
        """The p-th percentile in µs (0 <= p <= 100), None when empty.

        Nearest-rank definition: the smallest recorded value with at least p% of
        values at or below it (numpy's ``method="inverted_cdf"``), reported as
        its bucket's midpoint clamped to the exact [min, max]. p=0 and p=100 give
        the exact min and max.
        """
        if not 0 <= p <= 100:  # also rejects NaN
            raise ValueError(f"percentile must be within [0, 100], got {p}")
        if self._count == 0:
            return None
        assert self._min is not None and self._max is not None
        if p == 0:
            return float(self._min)
        if p == 100:
            return float(self._max)
        # Fraction of the decimal spelling so that p=99.9 means exactly 999/1000:
        # float rounding would otherwise push ranks like 999.0000001 up by one.
        rank = max(math.ceil(Fraction(repr(float(p))) * self._count / 100), 1)
        bucket = int(np.searchsorted(np.cumsum(self._counts), rank, side="left"))
        return float(min(max(_MIDS[bucket], self._min), self._max))

    def count_at_least(self, value_us: int) -> int:
        """How many recorded values are at least ``value_us``: exact below 128 µs,
        within the bucket holding ``value_us`` (at most 1/64 of it wide) above, where
        that bucket is counted whole."""
        if value_us <= 0:
            return self._count
        index = _index_of(int(value_us))
        if index >= _SIZE:
            return 0
        return int(self._counts[index:].sum())

    def bins(self, per_octave: int = 4) -> list[tuple[float, float, int]]:
        """The counts gathered into ``per_octave`` bins per power of two, for a chart:
        (low, high, count), the bin from 2**(k / per_octave) up to 2**((k + 1) /
        per_octave), the empty bins left out. A bucket goes whole into the bin of its
        lower bound (0 into the first), so a bin's count is off by at most a bucket's
        width (1/64 of its value) at its edges, and exact below 128.

        >>> h = LatencyHistogram()
        >>> for v in (1, 1, 3, 100, 130, 1000): h.record(v)
        >>> h.bins(1)
        [(1.0, 2.0, 2), (2.0, 4.0, 1), (64.0, 128.0, 1), (128.0, 256.0, 1), (512.0, 1024.0, 1)]
        >>> sum(c for _, _, c in h.bins(4)) == h.count
        True
        """
        if per_octave < 1:
            raise ValueError(f"per_octave must be at least 1, got {per_octave}")
        nonzero = np.flatnonzero(self._counts)
        lows = np.maximum(_LOWS[nonzero], 1).astype(np.float64)
        keys = np.floor(np.log2(lows) * per_octave).astype(np.int64)
        counts: dict[int, int] = {}
        for key, index in zip(keys.tolist(), nonzero.tolist(), strict=True):
            counts[key] = counts.get(key, 0) + int(self._counts[index])
        return [(2.0 ** (k / per_octave), 2.0 ** ((k + 1) / per_octave), n)
                for k, n in sorted(counts.items())]

    def summary(self) -> dict[str, float | int | None]:
        """count, mean, p50/p90/p99/p99.9, max and min, all in µs."""
        return {
            "count": self._count,
            "mean_us": self.mean(),
            "p50_us": self.percentile(50),
            "p90_us": self.percentile(90),
            "p99_us": self.percentile(99),
            "p999_us": self.percentile(99.9),
            "max_us": self._max,
            "min_us": self._min,
        }

    def to_bytes(self) -> bytes:
        """A compact, exact serialisation (suits a SQLite BLOB); see :meth:`from_bytes`."""
        nonzero = np.flatnonzero(self._counts)
        total = self._total.to_bytes(max((self._total.bit_length() + 7) // 8, 1), "little")
        body = b"".join(
            (
                _BODY_HEAD.pack(
                    self._count,
                    -1 if self._min is None else self._min,
                    -1 if self._max is None else self._max,
                    nonzero.size,
                    len(total),
                ),
                total,
                nonzero.astype("<u2").tobytes(),
                self._counts[nonzero].astype("<i8").tobytes(),
            )
        )
        return _HEAD.pack(_MAGIC, _FORMAT_VERSION) + zlib.compress(body, 6)

    @classmethod
    def from_buckets(cls, buckets: Mapping[int, int], *, total: int, low: int | None,
                     high: int | None) -> LatencyHistogram:
        """A histogram from counts already bucketed in this scheme elsewhere (a bucket's
        index -> how many values it holds), with the exact ``total``, smallest
        (``low``) and largest (``high``) value kept beside them: what an aggregation
        computed in the kernel (probes/anatomy.py) hands over. The count is the
        buckets' sum. ValueError when they cannot describe one set of values (an index
        out of range, a negative count, extremes outside the buckets that are filled).

        >>> h = LatencyHistogram.from_buckets({5: 2, 129: 1}, total=140, low=5, high=130)
        >>> h.count, h.total, h.min, h.max
        (3, 140, 5, 130)
        """
        result = cls()
        for index, n in buckets.items():
            if not 0 <= index < _SIZE or n < 0:
                raise ValueError(f"bucket {index} with {n} values is not of this scheme")
            result._counts[index] += n
        result._count = int(result._counts.sum())
        if result._count == 0:
            if total or low is not None or high is not None:
                raise ValueError("no values, yet a total or extremes")
            return result
        filled = np.flatnonzero(result._counts)
        if (low is None or high is None or not 0 <= low <= high
                or _index_of(min(low, MAX_VALUE)) != filled[0]
                or _index_of(min(high, MAX_VALUE)) != filled[-1]
                or not low * result._count <= total <= high * result._count):
            raise ValueError(f"extremes {low}..{high} and total {total} do not fit the "
                             "buckets")
        result._total = total
        result._min, result._max = low, high
        return result

    @classmethod
    def from_bytes(cls, data: bytes) -> LatencyHistogram:
        """Rebuild a histogram written by :meth:`to_bytes`; ValueError if it is not one."""
        if len(data) < _HEAD.size:
            raise ValueError("not a serialised LatencyHistogram: too short")
        magic, version = _HEAD.unpack_from(data)
        if magic != _MAGIC or version != _FORMAT_VERSION:
            raise ValueError("not a serialised LatencyHistogram (bad magic or version)")
        try:
            body = zlib.decompress(data[_HEAD.size :])
        except zlib.error as exc:
            raise ValueError(f"corrupt LatencyHistogram: {exc}") from None
        if len(body) < _BODY_HEAD.size:
            raise ValueError("corrupt LatencyHistogram: truncated header")
        count, low, high, n_nonzero, total_len = _BODY_HEAD.unpack_from(body)
        at = _BODY_HEAD.size
        if len(body) != at + total_len + n_nonzero * 10:
            raise ValueError("corrupt LatencyHistogram: wrong length")
        total = int.from_bytes(body[at : at + total_len], "little")
        at += total_len
        index = np.frombuffer(body, dtype="<u2", count=n_nonzero, offset=at).astype(np.int64)
        at += 2 * n_nonzero
        counts = np.frombuffer(body, dtype="<i8", count=n_nonzero, offset=at).astype(np.int64)
        if (
            (n_nonzero and (index[-1] >= _SIZE or np.any(np.diff(index) <= 0)))
            or np.any(counts <= 0)
            or int(counts.sum()) != count
            or (count == 0) != (low < 0)
            or (count == 0) != (high < 0)
        ):
            raise ValueError("corrupt LatencyHistogram: inconsistent contents")
        result = cls()
        result._counts[index] = counts
        result._count = count
        result._total = total
        result._min = None if count == 0 else low
        result._max = None if count == 0 else high
        return result
