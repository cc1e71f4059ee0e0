"""One ``syncrep-lab run`` of a spec text, as the bench scripts time it: the spec written
beside the run folder, the command line run as a user would, its wall time returned.
A run that fails ends the script with its exit status (and, when its output was
captured, the end of what it said)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def timed_run(spec_text: str, out: Path, *args: str, capture: bool = False) -> float:
    """Seconds ``syncrep-lab run SPEC --out OUT ARGS`` took; its output shown unless
    ``capture``."""
    spec = out.with_suffix(".toml")
    spec.write_text(spec_text)
    started = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "syncrep_lab", "run", str(spec), "--out",
                          str(out), *args], capture_output=capture, text=True,
                         stdin=subprocess.DEVNULL, check=False)
    if res.returncode != 0:
        said = f"\n{res.stderr[-2000:]}" if capture else ""
        raise SystemExit(f"the run failed (exit {res.returncode}); its store is in "
                         f"{out}{said}")
    return time.monotonic() - started
