"""One measured repeat as the store keeps it, built from what pgbench gave: no server,
no file and no clock is touched here, so every figure of a repeat can be checked on
values worked out by hand (tests/test_repeat_record.py).

A repeat against several instances at once is one repeat: its TPS is the sum of every
pgbench's own, its latencies those of all their transactions (the per-transaction logs
merged), and each instance's own figures go to ``instance_results``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from syncrep_lab.readers.pgbench_log import TransactionLogStats
from syncrep_lab.run.workload import ClientRun
from syncrep_lab.store import InstanceResultRow, SampleRow


@dataclass(frozen=True)
class Disturbance:
    """What was seen around a repeat (run/reset.py)."""

    checkpoints: int | None = None
    autovacuums: int | None = None
    other_cpu: float | None = None  # other processes' CPU during it, in cores
    disturbed: str | None = None  # what hit it, for the notes


@dataclass(frozen=True)
class RepeatRecord:
    """The ``repeats`` row, the per-second ``samples`` and the per-instance rows."""

    values: dict[str, Any]
    samples: list[SampleRow]
    instance_rows: list[InstanceResultRow] = field(default_factory=list)

    @property
    def tps(self) -> float:
        return float(self.values["tps"])


def build(runs: list[ClientRun], per_instance: list[TransactionLogStats],
          instances: list[int], *, n: int, probed: int, started_at: str,
          round_no: int | None, position: int | None, seen: Disturbance,
          stdout_path: str, stderr_path: str) -> RepeatRecord:
    """The record of one repeat: ``runs[i]`` is the pgbench of instance ``instances[i]``
    and ``per_instance[i]`` what its per-transaction logs hold."""
    if not runs or len(runs) != len(per_instance) or len(runs) != len(instances):
        raise ValueError("one pgbench run, log figure and instance number each")
    stats = per_instance[0]
    for more in per_instance[1:]:
        stats = stats + more
    h = stats.histogram.summary()
    values: dict[str, Any] = {
        "n": n, "probed": probed, "started_at": started_at,
        "round": round_no, "position": position, "checkpoints": seen.checkpoints,
        "autovacuums": seen.autovacuums, "other_cpu": seen.other_cpu,
        "disturbed": seen.disturbed,
        "duration_s": max(run.seconds for run in runs),
        "transactions": stats.transactions, "failed": stats.failed,
        "tps": sum(float(run.summary.tps or 0) for run in runs),
        "pgbench_transactions": sum(int(run.summary.transactions or 0) for run in runs),
        # one pgbench: its own summary's figure; several: the merged logs' mean
        "pgbench_latency_avg_ms": (runs[0].summary.latency_avg_ms if len(runs) == 1
                                   else ms(h["mean_us"])),
        **latency_fields(h),
        "histogram": stats.histogram.to_bytes(),
        "stdout_path": stdout_path, "stderr_path": stderr_path,
    }
    rows = []
    if len(runs) > 1:
        for instance, run, st in zip(instances, runs, per_instance, strict=True):
            hs = st.histogram.summary()
            rows.append(InstanceResultRow(instance, float(run.summary.tps or 0),
                                          st.transactions, st.failed, ms(hs["mean_us"]),
                                          ms(hs["p99_us"])))
    return RepeatRecord(values, summed_progress(runs), rows)


def summed_progress(runs: list[ClientRun]) -> list[SampleRow]:
    """Per-second progress of all instances as one: TPS summed, latency weighted by
    TPS (the first instance's own figures when there is one)."""
    if len(runs) == 1:
        return [SampleRow(s.t_s, s.tps, s.latency_ms, s.stddev_ms, s.failed)
                for s in runs[0].progress]
    out: list[SampleRow] = []
    for i in range(min(len(r.progress) for r in runs)):
        samples = [r.progress[i] for r in runs]
        tps = float(sum(s.tps for s in samples))
        lat = (sum(s.tps * s.latency_ms for s in samples if s.latency_ms is not None) / tps
               if tps > 0 and all(s.latency_ms is not None for s in samples) else None)
        out.append(SampleRow(samples[0].t_s, tps, lat, None, sum(s.failed for s in samples)))
    return out


def latency_fields(summary: dict[str, Any]) -> dict[str, float | None]:
    """The ``lat_*_ms`` columns (of a repeat, or a cell's merged histogram) from a
    histogram's summary in microseconds."""
    return {f"lat_{name}_ms": ms(summary[f"{name}_us"])
            for name in ("mean", "p50", "p90", "p99", "p999", "max")}


def ms(us: float | int | None) -> float | None:
    return None if us is None else float(us) / 1000.0
