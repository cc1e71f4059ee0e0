"""Whether the standby's half of a commit adds up on a loaded machine: the parts that
probes/standby_anatomy.join gives each commit, summed, against the anatomy's
standby_wait of the same commits (the sum check), and the commits whose chain led to
another release than the one that freed them (left out by the join: ``elsewhere``), in
recordings with and without a CPU-bound neighbour, alternated.

The seed's shape on the embedded PostgreSQL 18 (a primary, standbys b and c, '1(b,c)'),
synchronous_commit = on, insert-only; each round one anatomy recording with the
standby's half around a short pgbench. A neighbour is ``--hogs`` busy loops, started
before the recording and stopped after it. Per round it prints the commits joined, those
left out as led elsewhere and the sum's ratio to the whole; a round with any left out,
or whose ratio is off by more than ``--keep-beyond``, keeps what bpftrace printed
(``anatomy.json``) and the moment its probes were attached (``attached_ns``) under
``--out``, for the join to be replayed on it.

    .venv/bin/python bench/standby_join_load.py [--rounds 10] [--clients 12]
        [--duration 3] [--hogs 2] [--fsync off] [--out DIR]
    .venv/bin/python bench/standby_join_load.py --replay REPEAT_DIR

``--replay``: the join again on a repeat's kept events, this bench's or a run's (a run
keeps ``standby-check.json`` with the moment where a repeat's sum check failed), and
what it says of them (probes/standby_anatomy.misjoined).

Root (bpftrace), about 20 s a round.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from syncrep_lab.cluster import server
from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.pg.installations import resolve
from syncrep_lab.plan.spec import Workload
from syncrep_lab.probes import standby_anatomy
from syncrep_lab.probes.anatomy import CommitAnatomy
from syncrep_lab.run.workload import prepare_tables, run_pgbench, script_text

HOG = "while True:\n    pass\n"


def joined_of(text: str, attached: int) -> standby_anatomy.Joined:
    """The join on what bpftrace printed, from the moment its probes were attached."""
    return standby_anatomy.join(standby_anatomy.since(standby_anatomy.events(text),
                                                      attached))


def ratio(joined: standby_anatomy.Joined) -> tuple[int, float | None]:
    """Commits joined and their parts' sum over their whole."""
    whole = sum(joined.whole)
    if not whole:
        return 0, None
    return len(joined.chains), sum(sum(c.parts.values()) for c in joined.chains) / whole


def replay(where: Path) -> int:
    """The join on a kept repeat's events, and what the sum check says of it."""
    text = (where / "anatomy.json").read_text(errors="replace")
    check = where / "standby-check.json"
    attached = (json.loads(check.read_text())["attached_ns"] if check.exists()
                else int((where / "attached_ns").read_text()))
    joined = joined_of(text, attached)
    n, r = ratio(joined)
    print(f"{n} commits joined, {joined.unmatched} unmatched, {joined.elsewhere} led "
          f"elsewhere, parts/whole {r if r is None else round(r, 3)}")
    print(standby_anatomy.led_elsewhere(joined) or "every chain ended at its own release")
    print(standby_anatomy.misjoined(joined) or "the sum holds")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--clients", type=int, default=12)
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--hogs", type=int, default=2)
    ap.add_argument("--fsync", default="off")
    ap.add_argument("--keep-beyond", type=float, default=0.2)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--replay", type=Path, default=None)
    args = ap.parse_args()
    if args.replay is not None:
        return replay(args.replay)
    work = Path(tempfile.mkdtemp(prefix="srl-join-load-", dir="/tmp"))
    work.chmod(0o755)
    keep = args.out or Path(f"{work}-kept")
    manifest = up(UpOptions(dir=work / "c", settings={"fsync": args.fsync}))
    found: dict[bool, list[float]] = {False: [], True: []}
    try:
        primary = manifest.primary
        prepare_tables(manifest.admin_conninfo(primary), Workload())
        script = manifest.dir / "insert.sql"
        script.write_text(script_text(Workload(), 1, manifest.dir))
        pgbench = resolve(manifest.bin_dir).program("pgbench")
        for n in range(args.rounds):
            loaded = n % 2 == 1
            hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in
                    range(args.hogs if loaded else 0)]
            try:
                pid = server.postmaster_pid(primary.data_dir(manifest.dir))
                assert pid is not None
                out = work / f"round-{n:02d}"
                recorder = CommitAnatomy(
                    Path(f"/proc/{pid}/exe"), [pid], out, [manifest.admin_conninfo(primary)],
                    standbys={s.name: manifest.admin_conninfo(s) for s in manifest.standbys})
                recorder.start()
                try:
                    run = run_pgbench(pgbench, manifest.conninfo(primary), script,
                                      clients=args.clients, threads=2,
                                      duration=args.duration, synchronous_commit="on")
                finally:
                    recorder.stop()
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
            text = recorder.output_path.read_text(errors="replace")
            chains = joined_of(text, recorder.attached_ns)
            joined, r = ratio(chains)
            said = f"{r:.3f}" if r is not None else "-"
            print(f"round {n:2d} {'loaded' if loaded else 'quiet '}: {run.summary.tps:7.0f} tps, "
                  f"{joined:5d} commits joined, {chains.elsewhere} led elsewhere, "
                  f"parts/whole {said}", flush=True)
            if r is not None:
                found[loaded].append(r)
            if r is None or chains.elsewhere or abs(r - 1) > args.keep_beyond:
                kept = keep / out.name
                kept.mkdir(parents=True, exist_ok=True)
                shutil.copy(recorder.output_path, kept / "anatomy.json")
                (kept / "attached_ns").write_text(f"{recorder.attached_ns}\n")
                print(f"  kept in {kept}", flush=True)
    finally:
        remove_cluster(manifest.dir)
        shutil.rmtree(work, ignore_errors=True)  # what was kept is under keep
    for loaded, values in found.items():
        if values:
            print(f"{'loaded' if loaded else 'quiet'}: parts/whole median "
                  f"{statistics.median(values):.3f}, range {min(values):.3f} to "
                  f"{max(values):.3f} over {len(values)} rounds")
    print(json.dumps({"kept": str(keep)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
