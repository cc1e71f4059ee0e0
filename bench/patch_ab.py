"""Stock PostgreSQL 18 (or 15) against the same with the project's example patch: the
released waiters' latches set after ``SyncRepLock`` is released
(examples/patches/syncrep-wake-after-release-VERSION.patch), judged by ``syncrep-lab ab``
(both built from Debian's source package and cached, the seed's shape interleaved, the
answer in OUT/summary.txt and OUT/ab.json). This script only names the patch and times
the command.

    .venv/bin/python bench/patch_ab.py [--version 18|15] [--out DIR] [--budget 10m]
        [--clients 8,64]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "examples" / "patches"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", choices=("18", "15"), default="18")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--budget", default=None)
    parser.add_argument("--clients", default=None)
    args = parser.parse_args()
    command = [sys.executable, "-m", "syncrep_lab", "ab", args.version, "--patch",
               str(PATCHES / f"syncrep-wake-after-release-{args.version}.patch")]
    for flag in ("out", "budget", "clients"):
        if getattr(args, flag) is not None:
            command += [f"--{flag}", str(getattr(args, flag))]
    started = time.monotonic()
    done = subprocess.run(command, check=False, stdin=subprocess.DEVNULL)
    print(f"\nsyncrep-lab ab took {(time.monotonic() - started) / 60:.1f} min "
          f"(exit {done.returncode})", file=sys.stderr)
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
