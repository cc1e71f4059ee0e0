"""Whether a run says what its emulated links really delivered: the two-cell spec of
tests/test_topology.py (no link, then 2 ms each way to the sync standby b, with the
commit anatomy and the standby's half) run twice, once as it is and once with every
delay line of the run paused ``--pause-ms`` in every ``--period-ms`` (SIGSTOP and
SIGCONT from here: a delay line without a CPU, as on a machine whose other tenants take
it). Printed for each: what ``costs`` says each direction delivered (network/delivery.py)
and the anatomy's transits out and back, which include it.

    .venv/bin/python bench/late_delay_line.py [--pause-ms 4] [--period-ms 10] [--json]

Needs root (namespaces) and a kernel without netem (the delay line is what is paused;
netem is in the kernel and cannot be). About a minute.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_topology import LINKED_ANATOMY  # noqa: E402  (the test's own spec)

DELAYER = "syncrep_lab.network.delayer"


def _lines() -> list[int]:
    out = subprocess.run(["pgrep", "-f", DELAYER], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _starve(stop: threading.Event, pause_s: float, period_s: float) -> None:
    """Pause every delay line pause_s of each period_s until ``stop``; leave them running."""
    pids: list[int] = []
    next_look = 0.0
    try:
        while not stop.is_set():
            if time.monotonic() >= next_look:  # lines come and go with the cells
                pids, next_look = _lines(), time.monotonic() + 0.5
            for sig, wait in ((signal.SIGSTOP, pause_s), (signal.SIGCONT, period_s - pause_s)):
                for pid in pids:
                    with contextlib.suppress(OSError):  # a line that has just gone
                        os.kill(pid, sig)
                time.sleep(wait)
    finally:
        for pid in _lines():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGCONT)


def _run(folder: Path) -> dict[str, Any]:
    spec = folder / "spec.toml"
    spec.write_text(LINKED_ANATOMY)
    res = subprocess.run([sys.executable, "-m", "syncrep_lab", "run", str(spec), "--out",
                          str(folder / "run")], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, check=False)
    if res.returncode != 0:
        sys.exit(f"the run failed:\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
    costs = json.loads(subprocess.run(
        [sys.executable, "-m", "syncrep_lab", "costs", str(folder / "run"), "--json"],
        capture_output=True, text=True, check=True).stdout)
    far = next(c for c in costs if "far" in c["label"])
    [half] = far["anatomy"]["standby"]
    parts = {p["component"]: p["us_per_commit"]["mean"] for p in half["parts"]}
    return {"delivered_ms": {f"{e['into']} from {e['from']}": e["late_by_kind"]["anatomy"]
                             + e["asked_ms"] for e in far["link_delays"]},
            "transit_out_ms": parts["transit_out"] / 1000.0,
            "transit_back_ms": parts["transit_back"] / 1000.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pause-ms", type=float, default=4.0)
    ap.add_argument("--period-ms", type=float, default=10.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not 0 < args.pause_ms < args.period_ms:
        sys.exit("--pause-ms must be above 0 and below --period-ms")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="srl-late-") as tmp:
        os.chmod(tmp, 0o755)
        for name in ("as it is", "starved"):
            folder = Path(tmp) / name.replace(" ", "-")
            folder.mkdir()
            stop = threading.Event()
            starver = threading.Thread(target=_starve, args=(
                stop, args.pause_ms / 1000, args.period_ms / 1000), daemon=True)
            if name == "starved":
                starver.start()
            try:
                out[name] = _run(folder)
            finally:
                stop.set()
                if starver.is_alive():
                    starver.join()
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name, got in out.items():
        given = ", ".join(f"{k} {v:.2f} ms" for k, v in got["delivered_ms"].items())
        print(f"{name}: delivered {given}; transits out {got['transit_out_ms']:.2f} ms, "
              f"back {got['transit_back_ms']:.2f} ms")


if __name__ == "__main__":
    main()
