"""Reading what pgbench writes: per-transaction logs, the final summary, progress lines.

This module owns turning pgbench's text into numbers:

* :func:`parse_transaction_log` / :func:`parse_transaction_logs` read the
  per-transaction logs of ``pgbench -l`` (one file per thread) into a
  :class:`~syncrep_lab.stats.histogram.LatencyHistogram` plus exact counts;
* :func:`parse_summary` reads the report pgbench prints on stdout at the end;
* :func:`parse_progress_line` reads one ``-P`` line from stderr.

The formats accepted are those of pgbench 9.6 through 18.

A log line is ``client_id transaction_no time script_no time_epoch time_us``
followed, depending on the options, by ``schedule_lag`` (``-R``) and
``retries`` (``--max-tries``). ``time`` is the latency in µs, or a word
(``skipped``, ``failed``, ``serialization``, ``deadlock``, ...) for a
transaction that did not succeed. A long benchmark writes tens of millions of
lines, so a log is read in fixed-size chunks and each chunk is converted by
numpy in C; only chunks holding such words take a slower path, and only for
their non-numeric lines.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from syncrep_lab.stats.histogram import MAX_VALUE, LatencyHistogram

__all__ = [
    "PgbenchSummary",
    "ProgressSample",
    "TransactionLogStats",
    "parse_progress_line",
    "parse_summary",
    "parse_transaction_log",
    "parse_transaction_logs",
    "transaction_log_paths",
]

DEFAULT_CHUNK_BYTES = 8 << 20
_MIN_FIELDS = 6
_NEWLINE = ord("\n")
_SPACE = ord(" ")
_FIRST_DIGIT = ord("0")
_LAST_DIGIT = ord("9")
_FAST_LIMIT = 10**12


@dataclass(frozen=True)
class TransactionLogStats:
    """What one or more per-transaction logs hold.

    ``failed`` counts every line whose latency field is a word rather than a
    number: failed transactions (pgbench 15+) and, with ``-R``/``-L``, skipped
    ones. ``first_epoch_us`` and ``last_epoch_us`` are the earliest and latest
    transaction end times (``time_epoch * 10**6 + time_us``), over all lines; in
    a log written by pgbench, which appends in completion order, these are the
    first and last lines.
    """

    transactions: int
    failed: int
    first_epoch_us: int | None
    last_epoch_us: int | None
    histogram: LatencyHistogram

    @property
    def span_s(self) -> float | None:
        """Seconds from the first to the last transaction end, None without lines."""
        if self.first_epoch_us is None or self.last_epoch_us is None:
            return None
        return (self.last_epoch_us - self.first_epoch_us) / 1e6

    def __add__(self, other: TransactionLogStats) -> TransactionLogStats:
        """The figures of both sets of logs together (what reading them all at once gives)."""
        firsts = [e for e in (self.first_epoch_us, other.first_epoch_us) if e is not None]
        lasts = [e for e in (self.last_epoch_us, other.last_epoch_us) if e is not None]
        return TransactionLogStats(self.transactions + other.transactions,
                                   self.failed + other.failed,
                                   min(firsts) if firsts else None,
                                   max(lasts) if lasts else None,
                                   self.histogram + other.histogram)


class _Tally:
    """Running totals while logs are read; frozen into TransactionLogStats at the end."""

    def __init__(self, histogram: LatencyHistogram) -> None:
        self.histogram = histogram
        self.transactions = 0
        self.failed = 0
        self.first: int | None = None
        self.last: int | None = None

    def add(self, latencies: npt.NDArray[np.int64], failed: int, first: int, last: int) -> None:
        self.histogram.record_array(latencies)
        self.transactions += int(latencies.size)
        self.failed += failed
        self.first = first if self.first is None else min(self.first, first)
        self.last = last if self.last is None else max(self.last, last)

    def stats(self) -> TransactionLogStats:
        return TransactionLogStats(
            transactions=self.transactions,
            failed=self.failed,
            first_epoch_us=self.first,
            last_epoch_us=self.last,
            histogram=self.histogram,
        )


def _numeric_block(block: bytes, tally: _Tally) -> bool:
    """Take a block of whole lines in C if every line is the same number of digit-only fields.

    Returns False, having changed nothing, when the block needs the slow path.
    """
    fields = block.count(b" ", 0, block.index(b"\n")) + 1
    if fields < _MIN_FIELDS:
        return False
    raw = np.frombuffer(block, dtype=np.uint8)
    if raw.max() > _LAST_DIGIT:
        return False
    # Every other byte below "0" is a separator. Each line must be fields-1 spaces
    # then a newline; with exactly lines*fields numbers parsed below (so no empty
    # field), every line then holds exactly `fields` numbers and columns line up.
    separators = np.flatnonzero(raw < _FIRST_DIGIT)
    lines, rest = divmod(separators.size, fields)
    if rest:
        return False
    kinds = raw[separators].reshape(lines, fields)
    del separators  # the largest temporary; drop it before fromstring allocates
    if not (np.all(kinds[:, :-1] == _SPACE) and np.all(kinds[:, -1] == _NEWLINE)):
        return False
    values = np.fromstring(block, dtype=np.int64, sep=" ")
    # fromstring saturates at 2**63-1 instead of failing, and end times multiply
    # seconds by 10**6: numbers this large are left to the exact Python path.
    if values.size != lines * fields or values.max() >= _FAST_LIMIT:
        return False
    table = values.reshape(lines, fields)
    ends = table[:, 4] * 1_000_000 + table[:, 5]
    tally.add(table[:, 2], 0, int(ends.min()), int(ends.max()))
    return True


def _line_by_line(lines: Iterable[bytes], tally: _Tally) -> None:
    latencies: list[int] = []
    failed = 0
    first: int | None = None
    last: int | None = None
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        try:
            if len(fields) < _MIN_FIELDS:
                raise ValueError("too few fields")
            for position in (0, 1, 3, 4, 5):
                if not fields[position].isdigit():
                    raise ValueError(f"field {position + 1} is not a number")
        except ValueError as exc:
            text = line.decode("utf-8", "replace").rstrip("\n")
            raise ValueError(f"not a pgbench per-transaction log line ({exc}): {text!r}") from None
        if fields[2].isdigit():
            # The histogram clamps anyway; clamping first keeps the array int64.
            latencies.append(min(int(fields[2]), MAX_VALUE))
        else:
            failed += 1
        end = int(fields[4]) * 1_000_000 + int(fields[5])
        first = end if first is None else min(first, end)
        last = end if last is None else max(last, end)
    if first is None or last is None:
        return
    tally.add(np.array(latencies, dtype=np.int64), failed, first, last)


def _split_odd_lines(block: bytes) -> tuple[bytes, list[bytes]]:
    """Split whole lines into those of digits and spaces only, and the others.

    The others hold the words pgbench writes in place of a latency, or damage.
    Returns the plain lines joined back into one block, and the others.
    """
    raw = np.frombuffer(block, dtype=np.uint8)
    odd_bytes = (raw > _LAST_DIGIT) | ((raw < _FIRST_DIGIT) & (raw != _SPACE) & (raw != _NEWLINE))
    odd_at = np.flatnonzero(odd_bytes)
    if odd_at.size == 0:
        return block, []
    newlines = np.flatnonzero(raw == _NEWLINE)
    # A line's index is the number of newlines before it; one entry per odd line.
    odd_line_numbers = np.unique(np.searchsorted(newlines, odd_at))
    ends = newlines[odd_line_numbers] + 1
    starts = np.where(odd_line_numbers > 0, newlines[odd_line_numbers - 1] + 1, 0)
    plain: list[bytes] = []
    odd: list[bytes] = []
    kept_from = 0
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        plain.append(block[kept_from:start])
        odd.append(block[start:end])
        kept_from = end
    plain.append(block[kept_from:])
    return b"".join(plain), odd


def _parse_block(block: bytes, tally: _Tally) -> None:
    """Parse whole lines (block ends with a newline)."""
    if _numeric_block(block, tally):
        return
    plain, odd = _split_odd_lines(block)
    if odd:
        # Typically a few skipped/failed lines among many good ones: take the odd
        # lines one by one and keep the fast path for the rest.
        _line_by_line(odd, tally)
        if not plain or _numeric_block(plain, tally):
            return
    _line_by_line(plain.split(b"\n"), tally)


def _read_into(path: Path, tally: _Tally, chunk_bytes: int) -> None:
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    with open(path, "rb") as log:
        while chunk := log.read(chunk_bytes):
            cut = chunk.rfind(b"\n") + 1
            while not cut:  # a line longer than chunk_bytes
                more = log.read(chunk_bytes)
                if not more:
                    # A log cut short (pgbench killed) or without a final newline.
                    if chunk.strip():
                        _parse_block(chunk + b"\n", tally)
                    return
                chunk += more
                cut = chunk.rfind(b"\n") + 1
            # Rewinding to the start of the partial last line, rather than carrying
            # it over, spares joining it to the next chunk: one copy less per chunk.
            if cut < len(chunk):
                log.seek(cut - len(chunk), 1)
                chunk = chunk[:cut]
            _parse_block(chunk, tally)
            del chunk


def parse_transaction_log(
    path: Path,
    histogram: LatencyHistogram | None = None,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> TransactionLogStats:
    """Read one ``pgbench -l`` per-transaction log (not ``--aggregate-interval``).

    Latencies of successful transactions go into ``histogram`` (a new one if
    None), which is also the returned stats' histogram. Memory stays bounded by
    ``chunk_bytes`` whatever the log's length. Raises ValueError on a line that
    is not a per-transaction log line.
    """
    tally = _Tally(histogram if histogram is not None else LatencyHistogram())
    _read_into(Path(path), tally, chunk_bytes)
    return tally.stats()


def parse_transaction_logs(
    paths: Iterable[Path], chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> TransactionLogStats:
    """Read several per-transaction logs (pgbench ``-j``: one per thread) as one."""
    tally = _Tally(LatencyHistogram())
    for path in paths:
        _read_into(Path(path), tally, chunk_bytes)
    return tally.stats()


def transaction_log_paths(directory: Path, prefix: str = "pgbench_log") -> list[Path]:
    """The per-thread logs ``prefix.PID`` and ``prefix.PID.N`` in a directory, in order."""
    name = re.compile(rf"{re.escape(prefix)}\.(\d+)(?:\.(\d+))?")
    found: list[tuple[int, int, Path]] = []
    for path in Path(directory).iterdir():
        match = name.fullmatch(path.name)
        if match and path.is_file():
            found.append((int(match[1]), int(match[2] or 0), path))
    return [path for _, _, path in sorted(found)]


@dataclass(frozen=True)
class PgbenchSummary:
    """The report pgbench prints when a run ends; a field is None when the version
    (or the options) did not print it."""

    transaction_type: str | None = None
    scaling_factor: int | None = None
    query_mode: str | None = None
    clients: int | None = None
    threads: int | None = None
    duration_s: int | None = None
    transactions: int | None = None
    failed: int | None = None
    latency_avg_ms: float | None = None
    latency_stddev_ms: float | None = None
    initial_connection_ms: float | None = None
    tps: float | None = None


_NUMBER = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf)"
# Anchored at line start: per-script and per-statement sections repeat some of
# these words indented or behind " - ", and must not be taken for the totals.
_SUMMARY_TEXT = {
    "transaction_type": re.compile(r"^transaction type: (.*?)\s*$", re.M),
    "query_mode": re.compile(r"^query mode: (\S+)", re.M),
}
_SUMMARY_INT = {
    "scaling_factor": re.compile(r"^scaling factor: (\d+)", re.M),
    "clients": re.compile(r"^number of clients: (\d+)", re.M),
    "threads": re.compile(r"^number of threads: (\d+)", re.M),
    "duration_s": re.compile(r"^duration: (\d+) s", re.M),
    "transactions": re.compile(r"^number of transactions actually processed: (\d+)", re.M),
    "failed": re.compile(r"^number of failed transactions: (\d+)", re.M),
}
_SUMMARY_FLOAT = {
    # 9.5 and earlier wrote "latency average: X ms"; accept both spellings.
    "latency_avg_ms": re.compile(rf"^latency average\s*[=:]\s*{_NUMBER} ms", re.M | re.I),
    "latency_stddev_ms": re.compile(rf"^latency stddev\s*[=:]\s*{_NUMBER} ms", re.M | re.I),
    "initial_connection_ms": re.compile(
        rf"^initial connection time\s*=\s*{_NUMBER} ms", re.M | re.I
    ),
}
_TPS = re.compile(rf"^tps = {_NUMBER}(.*)$", re.M | re.I)


def _tps(stdout: str) -> float | None:
    # Up to 13 pgbench printed two tps lines, "including connections establishing"
    # and "excluding ..."; 14+ prints one "(without initial connection time)". The
    # figure without connection setup is the one comparable across versions.
    chosen: float | None = None
    for match in _TPS.finditer(stdout):
        value = float(match[1])
        note = match[2]
        if "excluding" in note or "without" in note:
            return value
        if chosen is None:
            chosen = value
    return chosen


def parse_summary(stdout: str) -> PgbenchSummary:
    """Read pgbench's end-of-run report (9.6 … 18) from its stdout."""
    text: dict[str, str | None] = {}
    for key, pattern in _SUMMARY_TEXT.items():
        found = pattern.search(stdout)
        text[key] = found[1] if found else None
    ints: dict[str, int | None] = {}
    for key, pattern in _SUMMARY_INT.items():
        found = pattern.search(stdout)
        ints[key] = int(found[1]) if found else None
    floats: dict[str, float | None] = {}
    for key, pattern in _SUMMARY_FLOAT.items():
        found = pattern.search(stdout)
        floats[key] = float(found[1]) if found else None
    return PgbenchSummary(
        transaction_type=text["transaction_type"],
        scaling_factor=ints["scaling_factor"],
        query_mode=text["query_mode"],
        clients=ints["clients"],
        threads=ints["threads"],
        duration_s=ints["duration_s"],
        transactions=ints["transactions"],
        failed=ints["failed"],
        latency_avg_ms=floats["latency_avg_ms"],
        latency_stddev_ms=floats["latency_stddev_ms"],
        initial_connection_ms=floats["initial_connection_ms"],
        tps=_tps(stdout),
    )


@dataclass(frozen=True)
class ProgressSample:
    """One ``-P`` report: the interval ending at ``t_s`` (seconds since start, or
    since the epoch with ``--progress-timestamp``)."""

    t_s: float
    tps: float
    latency_ms: float | None
    stddev_ms: float | None
    failed: int = 0
    lag_ms: float | None = None
    skipped: int | None = None


_PROGRESS = re.compile(
    rf"^progress: {_NUMBER} s, {_NUMBER} tps, lat {_NUMBER} ms(?: stddev {_NUMBER})?(.*)$",
    re.I,
)
_PROGRESS_FAILED = re.compile(r", (\d+) failed\b")
_PROGRESS_LAG = re.compile(rf", lag {_NUMBER} ms")
_PROGRESS_SKIPPED = re.compile(r", (\d+) skipped\b")


def _finite(value: float) -> float | None:
    # Before pgbench 10 an interval without transactions divided by zero and
    # printed "lat -nan ms"; that means "no latency", not a number.
    return None if math.isnan(value) else value


def parse_progress_line(line: str) -> ProgressSample | None:
    """Read one ``progress: ...`` line of pgbench's stderr; None for any other line."""
    match = _PROGRESS.match(line.strip())
    if match is None:
        return None
    t_s, tps, latency, stddev, rest = match.groups()
    failed = _PROGRESS_FAILED.search(rest)
    lag = _PROGRESS_LAG.search(rest)
    skipped = _PROGRESS_SKIPPED.search(rest)
    return ProgressSample(
        t_s=float(t_s),
        tps=float(tps),
        latency_ms=_finite(float(latency)),
        stddev_ms=None if stddev is None else _finite(float(stddev)),
        failed=int(failed[1]) if failed else 0,
        lag_ms=_finite(float(lag[1])) if lag else None,
        skipped=int(skipped[1]) if skipped else None,
    )
