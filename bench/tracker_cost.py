"""The process tracker's own CPU per poll (probes/tracker.py): what reading /proc of
the processes born during a repeat costs, the part of the tracker that runs through
every measured repeat (at 1 Hz) and every probed one (at ``proc_hz``).

N processes (``sleep``) are started as children of this process after the tracker's
first snapshot, so each poll reads all of them as it reads pgbench's backends; the
thread CPU time of ``polls`` polls is divided by the polls and the processes. The
same script, run with another checkout's ``src`` first on PYTHONPATH, measures that
checkout's tracker: rounds alternate nothing, so run the two one after the other a few
times and compare the medians.

    PYTHONPATH=src .venv/bin/python bench/tracker_cost.py [--processes 64] [--polls 200]
        [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

from syncrep_lab.probes import tracker as tracker_module
from syncrep_lab.probes.tracker import ProcessTracker


def one_round(processes: int, polls: int) -> float:
    """Microseconds of this thread's CPU per process per poll."""
    me = os.getpid()
    # hz: the tracker's own thread must not poll meanwhile; the polls are made here
    tracker = ProcessTracker({"bench": me}, {}, hz=1e-3, numa=False)
    tracker.begin()
    children = [subprocess.Popen(["sleep", "600"]) for _ in range(processes)]
    try:
        tracker._poll_node("bench", me, born_during=True)  # each one's role, once
        start = time.thread_time()
        for _ in range(polls):
            tracker._poll_node("bench", me, born_during=True)
        spent = time.thread_time() - start
    finally:
        tracker.stopping.set()
        for child in children:
            child.kill()
        for child in children:
            child.wait()
    return 1e6 * spent / polls / processes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=64)
    parser.add_argument("--polls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    costs = [one_round(args.processes, args.polls) for _ in range(args.rounds)]
    per_poll_ms = statistics.median(costs) * args.processes / 1e3
    print(f"tracker from {tracker_module.__file__}")
    print(f"{args.processes} processes, {args.polls} polls, {args.rounds} rounds: "
          f"{', '.join(f'{c:.1f}' for c in costs)} µs per process per poll "
          f"(median {statistics.median(costs):.1f}); a poll of them all "
          f"{per_poll_ms:.2f} ms, at 1 Hz {per_poll_ms / 10:.2f} % of a core")


if __name__ == "__main__":
    main()
