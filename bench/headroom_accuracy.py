"""How well observe's headroom foretells the ceiling, against the ceiling measured on the
same cluster right after, in the two regimes a DBA meets:

- ``cpu``: standbys on fast storage, pgbench flat out at ``--low`` clients while observe
  reads the headroom; the truth is pgbench flat out at ``--high`` clients (the CPUs' own
  ceiling: more clients only batch more);
- ``wait``: sync standby b's volume held to 60 IOPS (tests/slow_disk.py), pgbench at
  ``--wait-clients`` clients held to half the rate it reaches flat out (``--rate``), while
  observe reads the headroom; the truth is the same clients flat out: the wait's ceiling
  at this concurrency.

For each reading: the headroom, its interval, the ceiling that set it, the truth (the
measured rate over the observed one), the error (headroom / truth - 1) and whether the
interval holds the truth. Conditions alternate within each round.

    .venv/bin/python bench/headroom_accuracy.py [--rounds 3] [--seconds 10]

Root (loop device, blkio cgroup).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.slow_disk import WORKLOAD, cluster, postmaster_of, throttled, volume

from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.pg.installations import resolve

WAIT_IOPS = 60


def pgbench(manifest: Manifest, clients: int, seconds: int, script: Path,
            rate: float | None = None) -> subprocess.Popen[str]:
    argv = [str(resolve("18").program("pgbench")), "-n", "-c", str(clients), "-j", "2",
            "-T", str(seconds), "-f", str(script)]
    if rate is not None:
        argv += ["-R", f"{rate:.0f}"]
    return subprocess.Popen([*argv, manifest.conninfo(manifest.primary)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def flat_out(manifest: Manifest, clients: int, seconds: int, script: Path) -> float:
    """pgbench's own tps (without the connections' time), flat out."""
    out = pgbench(manifest, clients, seconds, script).communicate()[0]
    found = re.search(r"tps = ([\d.]+)", out)
    if found is None:
        raise SystemExit(f"pgbench said: {out}")
    return float(found.group(1))


def observed(manifest: Manifest, clients: int, seconds: int, script: Path, work: Path,
             rate: float | None = None) -> dict[str, Any]:
    bench = pgbench(manifest, clients, seconds + 30, script, rate)
    out = Path(tempfile.mkdtemp(prefix="obs-", dir=work))
    try:
        res = subprocess.run(
            [sys.executable, "-m", "syncrep_lab", "observe", "--dir", str(manifest.dir),
             "--seconds", str(seconds), "--slice", "2", "--out", str(out), "--json"],
            capture_output=True, text=True, timeout=seconds + 120)
    finally:
        bench.terminate()
        bench.communicate(timeout=60)
    if res.returncode != 0:
        raise SystemExit(f"observe failed: {res.stderr}")
    (window,) = json.loads(res.stdout)["windows"]
    return dict(window)


def reading(condition: str, window: dict[str, Any], truth_tps: float) -> dict[str, Any]:
    rate = float(window["writes_per_s"])
    bound = window["lowest_bound"] or {}
    low = bound.get("low", 0) / rate if bound else None
    high = bound.get("high", 0) / rate if bound else None
    truth = truth_tps / rate
    headroom = window["headroom"]
    return {"condition": condition, "observed_tps": round(rate, 1),
            "headroom": round(headroom, 3) if headroom else None,
            "low": round(low, 3) if low else None, "high": round(high, 3) if high else None,
            "bound": bound.get("resource"), "truth": round(truth, 3),
            "error": round(headroom / truth - 1, 3) if headroom else None,
            "held": bool(low is not None and high is not None and low <= truth <= high)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--low", type=int, default=8)
    parser.add_argument("--high", type=int, default=64)
    parser.add_argument("--wait-clients", type=int, default=16)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("root is needed (loop devices, blkio cgroups)")
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="srl-head-")))
        os.chmod(work, 0o755)
        script = work / "w.sql"
        script.write_text(WORKLOAD)
        fast = stack.enter_context(cluster(work / "fast"))
        vol = stack.enter_context(volume())
        slow = stack.enter_context(cluster(vol.mount / "slow"))
        b = postmaster_of(slow, "b")
        for k in range(args.rounds):
            for condition in (["cpu", "wait"] if k % 2 == 0 else ["wait", "cpu"]):
                if condition == "cpu":
                    window = observed(fast, args.low, args.seconds, script, work)
                    truth = flat_out(fast, args.high, args.seconds, script)
                else:
                    with throttled(b, vol, iops=WAIT_IOPS):
                        full = flat_out(slow, args.wait_clients, args.seconds, script)
                        window = observed(slow, args.wait_clients, args.seconds, script,
                                          work, rate=full / 2)
                        truth = flat_out(slow, args.wait_clients, args.seconds, script)
                rows.append({"round": k + 1, **reading(condition, window, truth)})
                print(json.dumps(rows[-1]), flush=True)
    for condition in ("cpu", "wait"):
        mine = [r for r in rows if r["condition"] == condition and r["error"] is not None]
        if mine:
            errors = [abs(r["error"]) for r in mine]
            print(f"{condition}: {len(mine)} readings, |error| median "
                  f"{100 * statistics.median(errors):.1f} % (max {100 * max(errors):.1f} %), "
                  f"interval held the truth {sum(r['held'] for r in mine)} of {len(mine)}")


if __name__ == "__main__":
    main()
