"""A verdict: a mechanism named as what limits throughput, with its confidence, the
evidence it rests on and what to try next; and a cell's diagnosis, its verdicts with
the model's ceiling. The shapes every rule answers in, the diagnosis's over a run's
cells (analysis/diagnosis.py) and an observation's over a live cluster
(analysis/observe.py): both import them from here, and observe.py nothing of the
diagnosis.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from syncrep_lab.analysis.evidence import Figure, Reach

# The lag that matters for each level: what the sync standby must have done
# before the commit returns.
LAG_OF_LEVEL = {"remote_write": "write_ms", "on": "flush_ms", "remote_apply": "replay_ms"}


class VerdictData(TypedDict):
    """A verdict as the commands print it (``--json``) and the report reads it."""

    mechanism: str
    confidence: str  # the level at the evidence's point estimates
    # the levels at the unfavourable and the favourable end of the evidence's intervals
    confidence_range: list[str]
    summary: str
    evidence: dict[str, float | str]
    intervals: dict[str, list[float]]  # an evidence figure -> [low, high]
    next_steps: list[str]


@dataclass
class Verdict:
    mechanism: str
    confidence: str  # high | medium | low | unknown
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

    def json(self) -> VerdictData:
        reach = self.reach or Reach(self.confidence, self.confidence, self.confidence)
        return {"mechanism": self.mechanism, "confidence": self.confidence,
                "confidence_range": [reach.worst, reach.best],
                "summary": self.summary, "evidence": dict(self.evidence),
                "intervals": {k: [round(f.low, 3), round(f.high, 3)]
                              for k, f in self.intervals.items()},
                "next_steps": list(self.next_steps)}


class CellDiagnosis(TypedDict):
    """One done cell's diagnosis (``diagnose --json``); an observe window's carries its
    observation (analysis/observe.py) too."""

    idx: int
    label: str
    tps_mean: float
    ceiling: str | None  # the model's headline
    ceiling_errors: list[str]
    verdicts: list[VerdictData]
    # which part of a commit grows with clients, against the same cell at fewer clients
    anatomy: NotRequired[str | None]
    observation: NotRequired[dict[str, Any]]
