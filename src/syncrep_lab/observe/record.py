"""An observation window stored like a run (``runs.kind = 'observe'``), so that every
command that reads a run reads it: one cell per window, one repeat per slice.

What each stored figure means here (docs/store.md says it for every column):

- a repeat's ``transactions`` and ``tps`` are the transactions that *wrote* in the slice
  (transaction ids assigned): the ones that wait for a synchronous standby, and the
  denominator of every per-commit cost;
- a repeat's ``lat_mean_ms`` is the mean time a transaction spends in the server, by
  Little's law (client backends in a transaction, on average, over transactions per
  second): no client-side latency exists for a load the tool does not run, so there is
  no histogram and no percentile;
- ``samples`` holds the written transactions per second;
- ``waits``, ``wait_timeline``, ``replication_samples`` and ``proc_costs`` are those of a
  probed repeat, from the sampling; ``observed`` holds the counters and the observer's
  own cost;
- with ``--anatomy``, ``anatomy`` holds the commit anatomy of the slice (the difference of
  the probe's snapshots at its start and end, observe/anatomy.py) and ``probes`` its row:
  per written transaction, as in a run's repeat per pgbench transaction.
"""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path
from typing import Any

from syncrep_lab import __version__
from syncrep_lab.errors import UserError
from syncrep_lab.observe.watch import Slice, Watched
from syncrep_lab.stats.histogram import LatencyHistogram
from syncrep_lab.stats.intervals import rate_ci
from syncrep_lab.store import (
    ObservedRow,
    ProbeRows,
    Store,
    WaitRow,
    WaitTimelineRow,
    cluster_key_text,
    now,
)

KIND = "observe"


def _slice_rows(s: Slice, counts: ObservedRow) -> ProbeRows:
    return ProbeRows(
        waits=[WaitRow(node, role, kind, event, n, s.ticks[node])
               for (node, role, kind, event), n in sorted(s.waits.items())],
        wait_timeline=[WaitTimelineRow(second, node, role, kind, n,
                                       s.ticks_per_second[(second, node)])
                       for (second, node, role, kind), n in sorted(s.timeline.items())],
        replication_samples=s.replication,
        proc_costs=s.proc_rows,
        disk_io=s.disk_rows,
        observed=[counts],
        anatomy=s.anatomy,
        probes=[s.anatomy_probe] if s.anatomy_probe is not None else [],
    )


def _repeat(s: Slice, counts: ObservedRow, n: int) -> dict[str, Any]:
    seconds = max(s.duration_s, 1e-9)
    transactions = (counts.commits + counts.rollbacks) / seconds
    in_server_ms = (1000.0 * counts.in_transaction_mean / transactions
                    if transactions > 0 else None)
    return {"n": n, "probed": 0, "started_at": s.started_at, "duration_s": s.duration_s,
            "transactions": counts.xids, "failed": counts.rollbacks,
            "tps": counts.xids / seconds, "lat_mean_ms": in_server_ms,
            "histogram": LatencyHistogram().to_bytes()}


def store_window(out: Path, watched: Watched, *, label: str | None, params: dict[str, Any],
                 description: str, machine: dict[str, Any], version: str,
                 nodes: list[dict[str, Any]], settings: dict[str, Any],
                 notes: list[str], cpu_note: str | None,
                 program: str | None = None) -> tuple[int, int]:
    """Store one window in the run folder ``out`` (created, or the observe run already
    there: the window becomes its next cell). ``program``: the commit anatomy's, kept
    beside the store as ``anatomy-window-IDX.bt``. Returns (cell idx, slices stored)."""
    fresh = not (out / "syncrep-lab.sqlite").exists()
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        return _store_window(out, fresh, watched, label, params, description, machine,
                             version, nodes, settings, notes, cpu_note, program)
    except BaseException:
        if made:  # nothing half-written is left behind
            shutil.rmtree(out, ignore_errors=True)
        raise


def _store_window(out: Path, fresh: bool, watched: Watched, label: str | None,
                  params: dict[str, Any], description: str, machine: dict[str, Any],
                  version: str, nodes: list[dict[str, Any]], settings: dict[str, Any],
                  notes: list[str], cpu_note: str | None, program: str | None
                  ) -> tuple[int, int]:
    store = Store(out, create=fresh)
    try:
        if fresh:
            (out / "spec.toml").write_text(description)
            run_id = store.create_run(KIND, description, machine, __version__, kind=KIND)
        else:
            run = store.run()
            if run.kind != KIND:
                raise UserError(f"{out} holds a run of kind {run.kind or 'experiment'}, "
                                "not an observation",
                                "give observe an --out of its own (or of an earlier observe)")
            run_id = run.id
        idx = len(store.cells(run_id)) + 1
        # each window its own "cluster": the settings read back may differ between them
        params = {**params, "window": idx, "settings": f"window {idx}"}
        key = cluster_key_text(params)
        store.add_cluster(run_id, key, version, "", nodes, settings)
        cell = store.ensure_cell(run_id, idx, f"window {idx}", label or f"window {idx}",
                                 {}, params)
        cell_id = cell.id
        for n, s in enumerate(watched.slices, start=1):
            counts = s.counts(cpu_note)
            store.add_repeat(cell_id, _repeat(s, counts, n), s.per_second,
                             _slice_rows(s, counts))
        if program is not None:
            name = f"anatomy-window-{idx}.bt"
            (out / name).write_text(program)
            notes = [*notes, f"the commit anatomy's program, as attached: {name} beside the "
                     "store"]
        _summarise(store, cell_id, watched, notes)
        store.set_run_status(run_id, "done")
        return idx, len(watched.slices)
    finally:
        store.close()


def _summarise(store: Store, cell_id: int, watched: Watched, notes: list[str]) -> None:
    repeats = store.repeats(cell_id)
    tps = [float(r.tps) for r in repeats]
    in_server = [float(r.lat_mean_ms) for r in repeats if r.lat_mean_ms is not None]
    fields: dict[str, Any] = {
        "status": "done" if repeats else "failed",
        "stop_reason": "window",  # an observation ends with its window, not a target
        "error": None if repeats else (watched.ended or "nothing was sampled"),
        "transactions": sum(int(r.transactions) for r in repeats),
        "failed": sum(int(r.failed) for r in repeats),
        "lat_mean_ms": statistics.fmean(in_server) if in_server else None,
        "notes_json": json.dumps(notes), "started_at": repeats[0].started_at
        if repeats else now(), "finished_at": now()}
    if len(tps) > 1:
        ci = rate_ci(tps)
        fields.update(tps_mean=ci.mean, tps_stdev=ci.stdev, tps_ci_low=ci.low,
                      tps_ci_high=ci.high, tps_ci_rel=ci.half_width_rel)
    elif tps:
        fields.update(tps_mean=tps[0], tps_stdev=0.0)
    store.update_cell(cell_id, **fields)
