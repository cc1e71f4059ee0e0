"""One timeline per repeat: seconds since the client started, on this machine's clock.

A repeat's figures over time come from several clocks. pgbench (or sysbench) counts its
per-second progress from its own start, on the machine it runs on; the fault driver and
the samplers (wait events, ``pg_stat_replication``) stamp what they see with this
process's monotonic clock, each from the moment it started. Stored, every one of them is
in seconds since the client started, so that a fault event, a standby's lag and the
second whose TPS fell line up.

The client's start is known on its own clock: here, the moment it was spawned; on an SSH
host, what the host's clock said just before the shell started it (the wrapper writes
it, run/remote_client.py). A host's clock is not this machine's: its offset,
measured over SSH at the start of the repeat (run/host_watch.py), is taken off
before the start is placed on this machine's timeline. Without that, a client host whose
clock is ahead by seven seconds would put every fault seven seconds after the dip in
throughput it caused. The offset's uncertainty (half the shortest SSH round trip, stored
in ``host_repeats``) bounds the error of that placement; a client here adds only the
time between its spawn and its first transaction, as before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Timeline:
    """Where the client's start lies on this machine's clock, and how to move a time
    stamped by this process's monotonic clock onto the client's timeline."""

    launched: float  # the client's start, in seconds since the epoch on this machine's clock
    wall_minus_monotonic: float  # time.time() - time.monotonic(), read once

    @classmethod
    def of(cls, launched_epoch: float, clock_offset_s: float = 0.0) -> Timeline:
        """``launched_epoch`` on the clock of the machine the client ran on, whose clock is
        ``clock_offset_s`` ahead of this one's (0 for a client here)."""
        return cls(launched_epoch - clock_offset_s, time.time() - time.monotonic())

    def shift(self, origin_monotonic: float) -> float:
        """What to add to seconds counted from ``origin_monotonic`` (this process's
        monotonic clock) to get seconds since the client started."""
        return origin_monotonic + self.wall_minus_monotonic - self.launched
