"""A standby made slow in one part only: its WAL flushes ([nodes.b] flush_delay_us, a
preloaded library) or its replay (recovery_min_apply_delay, a setting of b's own), each in
a settings set of its own so that one run compares them with the stock cluster. One run
of three one-client cells serves the physics tests; the refusals run in this process."""

from __future__ import annotations

import json
import sqlite3
import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncrep_lab import paths
from syncrep_lab.probes import standby_anatomy

from .helpers import cli_here, run_postmasters, spec_run
from .test_standby_anatomy import SUM_WITHIN

# b's flush delay in the slowflush cell: well above what a flush of this machine's shared
# disk takes when other work writes to it (the stock standby's flush part went from
# 0.3 to 2.6 ms, median, between two sittings)
FLUSH_US = 10_000
# b's recovery_min_apply_delay in the slowreplay cell. 20 ms, not 5: it runs from the
# commit's time on the primary, so the standby's replay part (the commit anatomy's) is the
# delay less what came before it, and the shared disk's noise once put 1.7 ms more into
# the flush and took it from a 5 ms replay
REPLAY_MS = 20

SPEC = f"""\
name = "slow-standby"

[topology]
standbys = 1
sync = "b"

[workload]
clients = 1
duration = 3
warmup = 1
synchronous_commit = "remote_apply"

[nodes.b.sets.slowflush]
flush_delay_us = {FLUSH_US}

[nodes.b.sets.slowreplay]
settings = {{ recovery_min_apply_delay = "{REPLAY_MS}ms" }}

[matrix]
settings = ["default", "slowflush", "slowreplay"]

[run]
repeats_min = 1
repeats_max = 1

[probes]
perf = false
numa = false
flamegraphs = false
sched = false
gprof = false
anatomy = true
standby_anatomy = true
proc_hz = 0
wait_events_hz = 1
replication_hz = 100
"""


def _refused(res: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert res.returncode != 0, res.stdout
    assert "Traceback" not in res.stderr, res.stderr
    assert "fix:" in res.stderr, res.stderr
    for needle in needles:
        assert needle in res.stderr, res.stderr


@pytest.mark.parametrize(("edit", "needles"), [
    (("[nodes.b.sets.slowflush]", "[nodes.x.sets.slowflush]"),
     ["nodes.x: 'x' is not a node of any cell (nodes: primary, b)"]),
    ((f"flush_delay_us = {FLUSH_US}", "flush_delay_us = 2000000"),
     ["nodes.b.sets.slowflush.flush_delay_us", "less than or equal to 1000000"]),
    ((f"flush_delay_us = {FLUSH_US}", f"flush_delay_us = {FLUSH_US}\nsettings = "
      "{ fsync = false }"),
     ["b's fsync is off in settings set 'slowflush'", "set fsync = true in "
      "[nodes.b.settings]"]),
    ((f"flush_delay_us = {FLUSH_US}", f"flush_delay_us = {FLUSH_US}\nsettings = "
      "{ wal_sync_method = 'open_datasync' }"), ["no flush to slow down"]),
    (('"slowflush", "slowreplay"]', '"slowreplay"]'),
     ["settings set 'slowflush' is not in matrix.settings, so it never applies"]),
    (("[topology]", "[topology]\nattach = { primary = 'host=/tmp port=1' }"),
     ["an attached cluster's nodes are set up by its owner"]),
    (("[topology]", "[hosts.far]\naddress = '10.0.0.7'\nbin_dir = '/usr/bin'\n\n"
      "[topology]\nclone = 'basebackup'\nhosts = { b = 'far' }"),
     ["b runs on the SSH host 'far', and a slow flush is made on this machine"]),
])
def test_a_slow_node_that_cannot_be_is_refused(tmp_path: Path, edit: tuple[str, str],
                                               needles: list[str]) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace(*edit, 1))
    _refused(cli_here("run", str(spec), "--check"), *needles)


def test_a_set_of_one_node_alone_is_a_cell_and_the_seed_profile_is_no_refusal(
        tmp_path: Path) -> None:
    """slowflush and slowreplay are defined by b's sets alone; the seed profile's fsync
    = off is the tool's, turned on for b when the cluster is made, not refused."""
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC.replace("sync = \"b\"", "sync = \"b\"\nprofile = \"seed\""))
    res = cli_here("run", str(spec), "--check")
    assert res.returncode == 0, res.stderr
    assert "3 cells on 3 clusters" in res.stdout
    assert "set=slowflush" in res.stdout and "set=slowreplay" in res.stdout


def test_no_gcc_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    """A machine that cannot compile the preload library (no gcc on PATH, nothing in a
    fresh cache): the fix names the package."""
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    res = cli_here("run", str(spec), "--check",
                   env={"PATH": str(tmp_path), "SYNCREP_LAB_HOME": str(tmp_path / "home")})
    _refused(res, "needs gcc to compile its preload library", "apt-get install gcc")
    assert not (tmp_path / "home" / "cache").exists() or not any(
        (tmp_path / "home" / "cache").glob("slow-flush-*"))


@pytest.fixture(scope="module")
def run() -> Iterator[Path]:
    yield from spec_run("srl-slow-standby-", SPEC)


def _samples(run: Path) -> dict[str, list[tuple[float, float, float]]]:
    """Each cell's pg_stat_replication samples (write, flush and replay lag, ms) taken
    when b had flushed all it was sent, while the client ran, each reply's once. Only
    then is flush_lag the last flush's: a write reply sets it to "what it would be if
    flushed now", which is the write lag. The view keeps a reply's lags until the next
    one, so at 100 Hz one reply is read many times; after the client stopped, every
    sample read the last one (a suite on a fresh machine once had a slow cell's samples
    all one reply, whose write part carried 8.7 ms of the flush's sleep)."""
    with sqlite3.connect(run / "syncrep-lab.sqlite") as db:
        rows = db.execute(
            "select distinct c.key, r.id, s.write_lag_ms, s.flush_lag_ms, s.replay_lag_ms "
            "from replication_samples s join repeats r on r.id = s.repeat_id "
            "join cells c on c.id = r.cell_id where s.standby = 'b' and "
            "s.flush_lag_bytes = 0 and s.write_lag_ms is not null and "
            "s.replay_lag_ms is not null and s.t_s between 0 and r.duration_s"
        ).fetchall()
    out: dict[str, list[tuple[float, float, float]]] = {}
    for key, _, write, flush, replay in rows:
        out.setdefault(key.removeprefix("settings="), []).append((write, flush, replay))
    return out


def _p50_latency(run: Path) -> dict[str, float]:
    with sqlite3.connect(run / "syncrep-lab.sqlite") as db:
        rows = db.execute("select c.key, r.lat_p50_ms from repeats r join cells c on "
                          "c.id = r.cell_id where r.probed = 0").fetchall()
    return {key.removeprefix("settings="): p50 for key, p50 in rows}


def _part(samples: list[tuple[float, float, float]], part: str) -> float:
    """The median of a part of the standby's lag: its write, flush (flush less write)
    or replay (replay less flush), ms."""
    index = {"write": 0, "flush": 1, "replay": 2}[part]
    return statistics.median(s[index] - (s[index - 1] if index else 0.0) for s in samples)


def test_a_slow_flush_moves_the_flush_part_alone(run: Path) -> None:
    samples = _samples(run)
    stock, slow = samples["default"], samples["slowflush"]
    # b has flushed all it was sent only between a commit's apply and the next one's WAL,
    # about 3 % of the slow cell's time at one client: ~9 samples of 300 expected, and 3
    # seen in a 2 s repeat at 50 Hz with the machine loaded (hence 3 s at 100 Hz)
    assert len(stock) >= 5 and len(slow) >= 3, {k: len(v) for k, v in samples.items()}
    delay = FLUSH_US / 1000
    added = _part(slow, "flush") - _part(stock, "flush")
    # the sleep (less what the disk gave the stock flush at another moment), and no more
    # than twice it (a flush waits for one sleep, not a queue of them)
    assert 0.6 * delay <= added <= 2 * delay, (added, _part(stock, "flush"))
    # the write part is written before the flush: it does not carry the delay
    assert _part(slow, "write") - _part(stock, "write") < 0.3 * delay, (
        _part(slow, "write"), _part(stock, "write"))
    # and a remote_apply commit waits for the flush: about the delay more
    p50 = _p50_latency(run)
    assert p50["slowflush"] - p50["default"] >= 0.6 * delay, p50


def test_a_slow_replay_moves_remote_apply_and_not_the_flush(run: Path) -> None:
    samples = _samples(run)
    stock, slow = samples["default"], samples["slowreplay"]
    assert len(stock) >= 5 and len(slow) >= 5, {k: len(v) for k, v in samples.items()}
    # commit records wait REPLAY_MS on b, and a remote_apply commit waits for them
    p50 = _p50_latency(run)
    assert p50["slowreplay"] - p50["default"] >= 0.8 * REPLAY_MS, p50
    # replay_lag shows the delay in the samples taken just after an apply reply (a
    # write reply sets it to the write's; in between it is interpolated): about the
    # delay there, and many more such samples than the stock standby's noise gives
    behind = {k: [r - f for _, f, r in v if r - f >= 0.8 * REPLAY_MS]
              for k, v in (("default", stock), ("slowreplay", slow))}
    assert len(behind["slowreplay"]) >= 3, (behind, slow)
    assert len(behind["slowreplay"]) > 2 * len(behind["default"]), behind
    assert statistics.median(behind["slowreplay"]) <= 1.5 * REPLAY_MS, behind
    # while b writes and flushes as fast as the stock standby
    assert _part(slow, "flush") < _part(stock, "flush") + 0.5, (
        _part(slow, "flush"), _part(stock, "flush"))


def test_the_slow_standby_leaves_nothing(run: Path) -> None:
    """What made b slow lived in its processes alone: once the run ended, no process
    on this machine has this session's library mapped."""
    assert run_postmasters(run) == []
    library = str(paths.cache_dir() / "slow-flush-")
    holding = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if library in (entry / "maps").read_text(errors="replace"):
                    holding.append(entry.name)
            except OSError:
                continue
    assert holding == []
    assert any(paths.cache_dir().glob("slow-flush-*.so"))  # it was made, and is kept


def test_a_slow_flush_moves_the_flush_part_and_a_slow_replay_the_replay(run: Path) -> None:
    """The commit anatomy's split of the same cells: the sleep before each fdatasync is
    in the standby's flush part alone, the held replay in its replay part alone."""
    assert "standby_anatomy = true" in SPEC
    halves: dict[str, dict[str, float]] = {}
    for cell in json.loads(cli_here("costs", str(run), "--json").stdout):
        [half] = cell["anatomy"]["standby"]
        assert half["commits"] > 50 and abs(half["sum_ratio"] - 1) <= SUM_WITHIN, half
        halves[cell["label"].split("set=")[-1]] = {
            p["component"]: p["us_per_commit"]["mean"] for p in half["parts"]}
    stock, flushed, replayed = halves["default"], halves["slowflush"], halves["slowreplay"]
    assert set(stock) == {p for p in standby_anatomy.PARTS if p != "reply"}, stock
    flush_us, replay_us = FLUSH_US, REPLAY_MS * 1000.0

    def moved(cell: dict[str, float], part: str) -> float:
        return cell[part] - stock[part]

    # the sleep before each fdatasync is in the flush part, about once, and nowhere else
    assert 0.6 * flush_us <= moved(flushed, "flush") <= 2 * flush_us, (flushed, stock)
    for part in set(stock) - {"flush"}:
        assert abs(moved(flushed, part)) < 0.2 * flush_us, (part, flushed, stock)
    # commit records applied 20 ms after their commit: the wait up to the replay's end
    # at least that, the replay part that less what came before it; the flush and the
    # rest as they were
    applied = sum(replayed[p] for p in ("send", "transit_out", "write", "flush", "replay"))
    assert 0.8 * replay_us <= applied <= 1.5 * replay_us, (replayed, stock)
    assert 0.6 * replay_us <= moved(replayed, "replay") <= 1.5 * replay_us, (replayed, stock)
    for part in set(stock) - {"replay"}:
        assert abs(moved(replayed, part)) < 0.2 * replay_us, (part, replayed, stock)
    # diagnose names the flush where it binds, with an fdatasync's own time
    slow = next(c for c in json.loads(cli_here("diagnose", str(run), "--json").stdout)
                if c["label"].endswith("slowflush"))
    said = " ".join(v["summary"] for v in slow["verdicts"])
    assert "the part that binds is the standby's flush" in said, slow["verdicts"]


LOADED_SPEC = f"""\
name = "slow-standby-loaded"

[topology]
standbys = 2
sync = "1(b,c)"

[workload]
clients = 8
duration = 3
warmup = 1

[nodes.b.sets.slowflush]
flush_delay_us = {2 * FLUSH_US}

[matrix]
settings = ["default", "slowflush"]

[run]
repeats_min = 2
repeats_max = 2

[probes]
probed_repeats = 1
perf = false
numa = false
flamegraphs = false
sched = false
gprof = false
anatomy = false
wait_events_hz = 20
replication_hz = 20
"""


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield from spec_run("srl-slowload-", LOADED_SPEC)


def test_a_run_leads_with_the_slow_standbys_flush(loaded: Path) -> None:
    """8 clients on the seed's topology, b's flushes 20 ms late: the run's diagnosis
    leads with b's flush, from its walreceiver's wait events (its lag columns stay small
    beside a commit held by a standby that answers late), and says nothing of it for the
    stock cluster."""
    cells = {c["label"].split("set=")[-1]: c
             for c in json.loads(cli_here("diagnose", str(loaded), "--json").stdout)}
    first = cells["slowflush"]["verdicts"][0]
    assert first["mechanism"] == "network or standby flush/apply bound", cells["slowflush"]
    assert "standby b's WAL flush binds" in first["summary"], first
    assert first["evidence"]["walreceiver_flushing_share"] >= 0.6, first
    stock = " ".join(v["summary"] for v in cells["default"]["verdicts"])
    assert "WAL flush binds" not in stock, cells["default"]["verdicts"]
