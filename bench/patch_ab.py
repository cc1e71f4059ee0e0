"""Stock PostgreSQL 18 (or 15) against the same with the project's example patch: the
released waiters' latches set after ``SyncRepLock`` is released
(examples/patches/syncrep-wake-after-release-VERSION.patch).

Builds both from Debian's source package (``pg build``; cached, so only the first run
takes minutes), runs examples/patch-ab.toml (the seed's shape, interleaved: each round
runs both in a shuffled order, and the ratio patched / stock is paired by round), and
prints, per build: TPS with its interval, the sync walsender's (walsender:b) CPU and
kill() calls per commit, and the share of its on-CPU time inside
SyncRepReleaseWaiters; then the ratio with its interval and both flame graphs' paths.

    .venv/bin/python bench/patch_ab.py [--version 18|15] [--out DIR] [--clients 32]
        [--duration 15] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TOOL = [sys.executable, "-m", "syncrep_lab"]
PATCHES = ROOT / "examples" / "patches"
SPEC = ROOT / "examples" / "patch-ab.toml"
RELEASING = "SyncRepReleaseWaiters"


def tool(*args: str, timeout: float = 7200) -> str:
    res = subprocess.run([*TOOL, *args], capture_output=True, text=True, timeout=timeout,
                         check=False, stdin=subprocess.DEVNULL)
    if res.returncode not in (0, 4):
        raise SystemExit(f"syncrep-lab {' '.join(args)} failed ({res.returncode}):\n"
                         f"{res.stdout}{res.stderr}")
    return res.stdout


def build(version: str, name: str, *patch: str) -> dict[str, Any]:
    built: dict[str, Any] = json.loads(tool("pg", "build", version, "--name", name, *patch,
                                            "--json"))
    print(f"{name}: PostgreSQL {built['version']} {built['flavor']}, "
          f"{len(built['patches'])} patch(es), built in {built['seconds']:.0f} s "
          "(when first built: a cached build comes back at once)")
    return built


def spec_text(version: str, clients: int, duration: int, repeats: int) -> str:
    text = (SPEC.read_text().replace("pg18-", f"pg{version}-")
            .replace("stock 18 against 18", f"stock {version} against {version}"))
    text = re.sub(r"(?m)^clients = \d+", f"clients = {clients}", text)
    text = re.sub(r"(?m)^duration = \d+", f"duration = {duration}", text)
    return re.sub(r"(?m)^repeats_min = \d+", f"repeats_min = {repeats}", text)


def walsender(cell: dict[str, Any]) -> dict[str, Any]:
    role = next((r for r in cell["roles"]
                 if r["node"] == "primary" and r["role"] == "walsender:b"), None)
    graph = next((g for g in cell["flamegraphs"]
                  if g["node"] == "primary" and g["role"] == "walsender:b"), None)
    releasing = None
    if graph is not None:
        releasing = next((f["inclusive"] for f in graph["frames"] if f["frame"] == RELEASING),
                         0.0)
    kill = (role or {}).get("syscalls_per_commit", {}).get("kill", {}).get("mean")
    return {"cpu_us": role["cpu_us_per_commit"]["mean"] if role else None, "kill": kill,
            "releasing": releasing, "svg": graph["svg"] if graph else None}


def fmt(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", choices=("18", "15"), default="18")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--duration", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    stock, patched = f"pg{args.version}-stock", f"pg{args.version}-wake"
    build(args.version, stock)
    build(args.version, patched, "--patch",
          str(PATCHES / f"syncrep-wake-after-release-{args.version}.patch"))
    out = args.out or Path(tempfile.mkdtemp(prefix="srl-patch-ab-", dir="/tmp")) / "run"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.parent.chmod(0o755)
    spec = out.parent / "patch-ab.toml"
    spec.write_text(spec_text(args.version, args.clients, args.duration, args.repeats))
    tool("run", str(spec), "--out", str(out))
    results = {r["params"]["pg"]: r for r in json.loads(tool("results", str(out), "--json"))}
    costs = {c["label"].split("=", 1)[1]: c for c in json.loads(tool("costs", str(out),
                                                                      "--json"))}
    print(f"\nrun folder: {out} (report: {out / 'report.html'})")
    print(f"{'build':<12} {'TPS':>9} {'95% CI':>19} {'wal:b µs/commit':>16} "
          f"{'kill/commit':>12} {'in ' + RELEASING:>30}")
    for name in (stock, patched):
        r, w = results[name], walsender(costs[name])
        print(f"{name:<12} {r['tps_mean']:>9,.0f} "
              f"{fmt(r['tps_ci_low'], '{:,.0f}'):>9}–{fmt(r['tps_ci_high'], '{:,.0f}'):<9} "
              f"{fmt(w['cpu_us'], '{:.1f}'):>16} {fmt(w['kill'], '{:.2f}'):>12} "
              f"{fmt(w['releasing'], '{:.1%}'):>30}")
    ratio = results[patched]["ratio_to_baseline"]
    if ratio:
        paired = f"paired over {ratio['rounds']} rounds" if ratio["paired"] else "unpaired"
        print(f"\nTPS {patched} / {stock}: {ratio['mean']:.3f} "
              f"({ratio['low']:.3f}–{ratio['high']:.3f}, {paired})")
    for name in (stock, patched):
        print(f"flame graph of walsender:b, {name}: {walsender(costs[name])['svg']}")


if __name__ == "__main__":
    main()
