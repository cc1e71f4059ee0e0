"""What a bigger machine gives, checked where one is at hand: the seed preset over the
``cores`` axis (the servers confined to the first N CPUs), and each count's TPS
predicted by the model from the smallest count's cells (``model --cores N``: the
lowest of its CPU bounds and wait bounds recomputed for N CPUs), against what was
measured there.

On a machine with 8 CPUs or more the counts are 2, 4, 8 and 16 (as far as it goes);
on a smaller one, 1 and 2, and the script says which counts it could not run.

    PYTHONPATH=src .venv/bin/python bench/many_cores.py [--out DIR] [--budget 10m]
        [--reuse]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from syncrep_lab.analysis.model import run_model  # noqa: E402
from syncrep_lab.placement.cpus import machine_cpus  # noqa: E402
from syncrep_lab.plan.spec import preset_text  # noqa: E402
from syncrep_lab.store import Store  # noqa: E402

WANTED = (2, 4, 8, 16)


def counts(cpus: int) -> tuple[list[int], list[int]]:
    """The core counts to run here, and those this machine cannot."""
    if cpus >= 8:
        return [c for c in WANTED if c <= cpus], [c for c in WANTED if c > cpus]
    return [c for c in (1, 2) if c <= cpus], [c for c in WANTED if c > cpus]


def spec(cores: list[int], budget: str) -> str:
    """The seed preset with the cores axis, in its own budget."""
    text = preset_text("seed")
    text = text.replace('name = "seed"', 'name = "seed-cores"')
    text = re.sub(r'budget = "[^"]*"', f'budget = "{budget}"', text)
    return text.replace("[matrix]\n", f"[matrix]\ncores = {json.dumps(cores)}\n", 1)


def _key(params: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in params.items() if k != "cores"}, sort_keys=True,
                      default=str)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--budget", default="10m")
    parser.add_argument("--reuse", action="store_true",
                        help="read the run already in --out instead of making one")
    args = parser.parse_args()
    run, lacking = counts(len(machine_cpus()))
    print(f"this machine: {len(machine_cpus())} CPUs; cores run: {run}"
          + (f"; not run, the machine lacks the CPUs: {lacking}" if lacking else ""))
    out = args.out or Path(tempfile.mkdtemp(prefix="srl-cores-", dir="/tmp")) / "run"
    if not args.reuse:
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.parent.chmod(0o755)
        path = out.parent / "spec.toml"
        path.write_text(spec(run, args.budget))
        subprocess.run([str(ROOT / ".venv" / "bin" / "syncrep-lab"), "run", str(path),
                        "--out", str(out)], check=True, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL)
    store = Store(out, create=False)
    try:
        cells = [c for c in store.cells(store.run().id) if c.status == "done"]
    finally:
        store.close()
    smallest = min(run)
    measured = {(_key(c.params), int(c.params["cores"])): c for c in cells}
    print(f"run {out}; predicted from the cores = {smallest} cells "
          "(model --cores N: the lowest bound there)")
    print(f"{'cell':<48} {'cores':>5} {'predicted':>10} {'measured':>10} {'error':>7}  binds")
    errors = []
    for cores in run:
        if cores == smallest:
            continue
        for model in run_model(out, cores=float(cores), fits=False):
            source = next(c for c in cells if c.idx == model.idx)
            if int(source.params["cores"]) != smallest:
                continue
            target = measured.get((_key(source.params), cores))
            w = model.what_if
            if target is None or w is None or w.max_tps is None or not target.tps_mean:
                continue
            predicted = w.max_tps.mean
            error = predicted / float(target.tps_mean) - 1
            errors.append(abs(error))
            label = re.sub(r"\s*cores=\d+", "", source.label)
            print(f"{label:<48} {cores:>5} {predicted:>10,.0f} {target.tps_mean:>10,.0f} "
                  f"{100 * error:>+6.0f}%  {w.binding}")
    if errors:
        inside = sum(e <= 0.15 for e in errors)
        print(f"{inside} of {len(errors)} predictions within ±15 %")
    else:
        print("no cell could be predicted (no larger core count ran)")


if __name__ == "__main__":
    main()
