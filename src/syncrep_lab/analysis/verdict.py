"""A verdict: a mechanism named as what limits throughput, with its confidence, the
evidence it rests on and what to try next; and a cell's diagnosis, its verdicts with
the model's ceiling. The shapes every rule answers in, the diagnosis's over a run's
cells (analysis/diagnosis.py) and an observation's over a live cluster
(analysis/observe.py): both import them from here, and observe.py nothing of the
diagnosis.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from syncrep_lab.analysis.evidence import Figure, Reach
from syncrep_lab.json_form import JSON

# The lag that matters for each level: what the sync standby must have done
# before the commit returns.
LAG_OF_LEVEL = {"remote_write": "write_ms", "on": "flush_ms", "remote_apply": "replay_ms"}
# a walreceiver's wait events for its WAL sync and write (17 renamed WALSync to WalSync)
SYNC_EVENTS = ("IO:WalSync", "IO:WALSync")
WRITE_EVENTS = ("IO:WalWrite", "IO:WALWrite")


@dataclass(frozen=True)
class Verdict:
    mechanism: str
    confidence: str  # high | medium | low | unknown: the level at the evidence's points
    summary: str
    evidence: dict[str, float | str] = field(default_factory=dict)
    next_steps: list[str] = field(default_factory=list)
    reach: Reach | None = None  # None: the evidence has no interval
    intervals: dict[str, Figure] = field(default_factory=dict)

    @classmethod
    def graded(cls, mechanism: str, reach: Reach, summary: str,
               evidence: dict[str, float | str], next_steps: list[str],
               intervals: dict[str, Figure]) -> Verdict:
        return cls(mechanism, reach.point, summary, evidence, next_steps, reach,
                   {k: f for k, f in intervals.items() if f.known})

    @property
    def levels(self) -> tuple[str, str]:
        """(worst, best): the levels at the unfavourable and the favourable end of the
        evidence's intervals (the point's twice where it has none)."""
        reach = self.reach or Reach(self.confidence, self.confidence, self.confidence)
        return reach.worst, reach.best

    def to_json(self) -> dict[str, JSON]:
        """The verdict as ``diagnose --json`` prints it and the report reads it."""
        worst, best = self.levels
        return {"mechanism": self.mechanism, "confidence": self.confidence,
                "confidence_range": [worst, best],
                "summary": self.summary, "evidence": {k: v for k, v in self.evidence.items()},
                "intervals": {k: [round(f.low, 3), round(f.high, 3)]
                              for k, f in self.intervals.items()},
                "next_steps": list(self.next_steps)}


@dataclass(frozen=True)
class CellDiagnosis:
    """One done cell's diagnosis (``diagnose --json``); an observe window's carries its
    observation (analysis/observe.py) too."""

    idx: int
    label: str
    tps_mean: float
    ceiling: str | None  # the model's headline
    ceiling_errors: tuple[str, ...]
    verdicts: tuple[Verdict, ...]
    # which part of a commit grows with clients, against the same cell at fewer clients
    anatomy: str | None = None
    # the JSON has "anatomy" (null where nothing is said of it) for a cell whose commits
    # were timed and for every observe window, and no such key for any other cell
    anatomy_key: bool = False

    def extra_json(self) -> dict[str, JSON]:
        """What a kind of cell adds to the JSON before its anatomy (an observe window:
        its observation, analysis/observe.ObservedCell)."""
        return {}

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "idx": self.idx, "label": self.label, "tps_mean": self.tps_mean,
            "ceiling": self.ceiling, "ceiling_errors": list(self.ceiling_errors),
            "verdicts": [v.to_json() for v in self.verdicts], **self.extra_json()}
        if self.anatomy_key:
            out["anatomy"] = self.anatomy
        return out
