"""What `observe --dir D --anatomy` says of a cluster whose sync standby b is slow, made
slow three ways (tests/slow_disk.py): its volume held to an IOPS limit, to a throughput
limit, and the tool's preload that sleeps before each fdatasync; and of the same cluster
unslowed, as the control. For each: the rate, the first verdict, the headroom and the
ceiling that sets it, b's walreceiver's time in a sync, its flush lag both ways, and the
standby's half of the wait (transit out, queue, flush; a sync's time per call).

    .venv/bin/python bench/slow_standby.py [--clients 16] [--seconds 10] [--rounds 1]

Root (loop devices, blkio cgroups, the anatomy's bpftrace). Each round runs the four
conditions in an order shuffled by round, on one cluster (the preload's on a second,
built with it), so that a figure's spread across rounds can be read beside its level.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.slow_disk import WORKLOAD, Volume, cluster, postmaster_of, throttled, volume

from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.pg.installations import resolve

# the two disk-like limits: each makes b's WAL flush tens of ms here, where the loop
# device gives it well under one
IOPS = 60
BPS = 300_000
FLUSH_DELAY_US = 30_000


def observed(manifest: Manifest, clients: int, seconds: int, work: Path,
             text: bool = False) -> dict[str, Any]:
    """pgbench at ``clients`` beside one observe --dir --anatomy window: its answer
    (``text``: observe's own terminal answer is printed, as a user reads it)."""
    script = work / "w.sql"
    script.write_text(WORKLOAD)
    conninfo = manifest.conninfo(manifest.primary)
    bench = subprocess.Popen(
        [str(resolve("18").program("pgbench")), "-n", "-c", str(clients), "-j", "2", "-T",
         str(seconds + 60), "-f", str(script), conninfo],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = Path(tempfile.mkdtemp(prefix="obs-", dir=work))
    try:
        res = subprocess.run(
            [sys.executable, "-m", "syncrep_lab", "observe", "--dir", str(manifest.dir),
             "--anatomy", "--seconds", str(seconds), "--slice", str(seconds), "--out",
             str(out), "--json"], capture_output=True, text=True, timeout=seconds + 180)
    finally:
        bench.terminate()
        bench.wait(timeout=60)
    if res.returncode != 0:
        raise SystemExit(f"observe failed: {res.stderr}")
    if text:  # the same window, as `diagnose` and observe print it
        said = subprocess.run([sys.executable, "-m", "syncrep_lab", "diagnose", str(out)],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "COLUMNS": "100"})
        print(said.stdout, flush=True)
    (window,) = json.loads(res.stdout)["windows"]
    return dict(window)


def summary(name: str, w: dict[str, Any]) -> dict[str, Any]:
    verdicts = w["verdicts"]
    lowest = w["lowest_bound"] or {}
    b: dict[str, Any] = next((s for s in w["standbys"] if s["standby"] == "b"), {})
    half: dict[str, Any] = next(iter((w.get("anatomy") or {}).get("standby") or []), {})
    parts = {p["component"]: p["us_per_commit"]["mean"] for p in half.get("parts", [])}
    return {"condition": name, "writes_per_s": round(float(w["writes_per_s"]), 1),
            "first_verdict": verdicts[0]["mechanism"], "summary": verdicts[0]["summary"],
            "headroom": w["headroom"], "bound": lowest.get("resource"),
            "bound_kind": lowest.get("kind"), "b_syncing": b.get("syncing"),
            "b_view_flush_ms": b.get("view_flush_ms"),
            "b_position_flush_ms": b.get("position_flush_ms"),
            "b_sync_call_us": b.get("sync_call_us"), "b_syncs": b.get("syncs"),
            "half_us": {k: parts.get(k) for k in ("transit_out", "queue", "flush")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--text", action="store_true",
                        help="print each window's diagnose as a user reads it too")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("root is needed (loop devices, blkio cgroups, bpftrace)")
    rows = []
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="srl-slow-")))
        os.chmod(work, 0o755)
        vol: Volume = stack.enter_context(volume())
        disk = stack.enter_context(cluster(vol.mount / "c"))
        slept = stack.enter_context(cluster(work / "p", FLUSH_DELAY_US))
        b = postmaster_of(disk, "b")
        for k in range(args.rounds):
            order = ["control", "iops", "bps", "preload"]
            random.Random(k).shuffle(order)
            for name in order:
                if name == "preload":
                    w = observed(slept, args.clients, args.seconds, work, args.text)
                elif name == "control":
                    w = observed(disk, args.clients, args.seconds, work, args.text)
                else:
                    limit: dict[str, int] = {"iops": IOPS} if name == "iops" else {"bps": BPS}
                    with throttled(b, vol, **limit):
                        w = observed(disk, args.clients, args.seconds, work, args.text)
                rows.append({"round": k + 1, **summary(name, w)})
                print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
