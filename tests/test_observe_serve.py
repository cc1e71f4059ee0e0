"""``observe --serve`` and ``--textfile``: a real scrape of the endpoint while pgbench
runs, parsed by prometheus_client's own parsers and held against the same window's
``--json``; the textfile written whole; the Grafana dashboard's queries against the
names the exporter serves or says it could not; SIGTERM leaving nothing behind; bad
input refused before connecting; and lags that lie: the version rule, and a real
stalled replay (pg_wal_replay_pause on the standby, asynchronous commits) with the lag
from positions that stands in for the view's."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families
from psycopg import sql

from syncrep_lab.cluster.manifest import load
from syncrep_lab.errors import UserError
from syncrep_lab.observe.command import ObserveOptions
from syncrep_lab.observe.lags import Positions, lag_columns_may_freeze
from syncrep_lab.observe.serve import ServeOptions, check
from syncrep_lab.pg.installations import Installation

from .helpers import as_nobody, cli, cli_here, load_beside, shared_tmp, wait_until
from .test_observe import WORKLOAD, _up

DASHBOARD = Path(__file__).parent.parent / "examples" / "grafana-observe.json"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Path, str, str]]:
    root = shared_tmp("srl-serve-")
    where = root / "c"
    conninfo = _up(where, 1)
    manifest = load(where)
    assert manifest is not None
    yield where, conninfo, manifest.conninfo(manifest.standbys[0])
    cli("cluster", "down", "--dir", str(where))
    shutil.rmtree(root, ignore_errors=True)


def _pgbench(pg18: Installation, conninfo: str, seconds: int, script: Path,
             level: str = "on") -> subprocess.Popen[str]:
    return load_beside(pg18.program("pgbench"), conninfo, seconds, script, WORKLOAD,
                       level=level)


def _observer(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "syncrep_lab", "observe", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"})


def _address(proc: subprocess.Popen[str], said: list[str]) -> str:
    """The address the exporter printed it bound (stderr's first line)."""
    assert proc.stderr is not None
    line = proc.stderr.readline()
    said.append(line)
    found = re.search(r"http://\S+/metrics", line)
    assert found, line
    return found.group(0)


def _scrape(url: str, accept: str | None = None) -> tuple[str, str]:
    request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.read().decode(), answer.headers["Content-Type"]


def _samples(text: str) -> Samples:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _sessions(conninfo: str) -> int:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute("select count(*) from pg_stat_activity where application_name "
                           "= 'syncrep-lab observe'").fetchone()
    assert row is not None
    return int(row[0])


@dataclass
class Served:
    windows: list[dict[str, Any]]  # --json's lines
    scrape: str  # the text exposition, read while window 2 was watched
    openmetrics: tuple[str, str]  # the same, asked for as OpenMetrics, and its type
    textfile: Path
    returncode: int
    stderr: str
    sessions_after: int
    conninfo: str
    url: str


@pytest.fixture(scope="module")
def served(cluster: tuple[Path, str, str], pg18: Installation) -> Iterator[Served]:
    """Two 4 s windows served while pgbench runs: window 1's answer scraped during
    window 2, the textfile left by window 2."""
    where, conninfo, _ = cluster
    tmp = shared_tmp("srl-serve-run-")
    bench = _pgbench(pg18, conninfo, 40, tmp / "w.sql")
    try:
        proc = _observer("--dir", str(where), "--seconds", "4", "--slice", "1",
                         "--serve", "127.0.0.1:0", "--textfile", str(tmp / "syncrep.prom"),
                         "--windows", "2", "--json")
        said: list[str] = []
        url = _address(proc, said)
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())  # window 1 answered
        scrape, _ = _scrape(url)
        openmetrics = _scrape(url, "application/openmetrics-text; version=1.0.0")
        rest, stderr = proc.communicate(timeout=60)
        windows = [first, *(json.loads(line) for line in rest.splitlines() if line)]
        yield Served(windows, scrape, openmetrics, tmp / "syncrep.prom", proc.returncode,
                     "".join(said) + stderr, _sessions(conninfo), conninfo, url)
    finally:
        bench.terminate()
        bench.communicate(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


def test_a_scrape_gives_the_windows_json_figures(served: Served) -> None:
    assert served.returncode == 0, served.stderr
    assert [w["window"] for w in served.windows] == [1, 2]
    got = _samples(served.scrape)
    assert got[("syncrep_window_index", ())] == 1  # the window that had ended
    assert got[("syncrep_up", ())] == 1
    (o,) = served.windows[0]["windows"]
    assert o["writes_per_s"] > 100, o
    same = {"syncrep_writes_per_second": o["writes_per_s"],
            "syncrep_writes_per_second_lower": o["writes_ci"][0],
            "syncrep_writes_per_second_upper": o["writes_ci"][1],
            "syncrep_commits_per_second": o["commits_per_s"],
            "syncrep_sync_wait_ratio": o["sync_wait_share"],
            "syncrep_waiting_backends": o["waiting_backends_mean"],
            "syncrep_window_duration_seconds": o["seconds"]}
    for name, value in same.items():
        assert got[(name, ())] == pytest.approx(value, rel=1e-12), name
    assert 0 < o["sync_wait_share"] <= 1
    bound = o["lowest_bound"]
    labels = (("kind", bound["kind"]), ("resource", bound["resource"]))
    assert got[("syncrep_ceiling_writes_per_second", labels)] == pytest.approx(
        bound["max_tps"], rel=1e-12)
    # the headroom is the lowest of every ceiling the answer lists, named by its labels
    assert bound["max_tps"] == min(b["max_tps"] for b in o["bounds"])
    assert got[("syncrep_headroom_ratio", labels)] == pytest.approx(o["headroom"],
                                                                     rel=1e-12)
    # the headroom's interval is its ceiling's over the window's rate, and holds it
    low = got[("syncrep_headroom_ratio_lower", labels)]
    high = got[("syncrep_headroom_ratio_upper", labels)]
    assert low == pytest.approx(bound["low"] / o["writes_per_s"], rel=1e-12)
    assert low <= got[("syncrep_headroom_ratio", labels)] <= high
    (standby,) = o["replication"]
    who = standby["standby"]
    state = standby["states"].split(",")[-1]
    for kind in ("write", "flush", "replay"):
        key = ("syncrep_standby_lag_seconds",
               (("application_name", who), ("kind", kind), ("sync_state", state)))
        assert got[key] == pytest.approx(standby[f"{kind}_ms"] / 1000, rel=1e-12)
    (lags,) = served.windows[0]["lags"]
    for kind in ("write", "flush", "replay"):
        key = ("syncrep_standby_position_lag_seconds",
               (("application_name", who), ("kind", kind), ("sync_state", state)))
        assert got[key] == pytest.approx(lags["lag_from_positions_s"][kind], rel=1e-12)
        # the same lag, read two ways: both well under the window
        assert 0 <= got[key] < 1
    for position in ("sent", "write", "flush", "replay"):
        at = ("syncrep_standby_lsn_bytes", (("application_name", who),
                                           ("position", position)))
        assert got[at] == lags[f"{position}_lsn"]
    assert got[("syncrep_standby_lag_stale", (("application_name", who),))] == 0
    walsender = [v for (name, labels_), v in got.items()
                 if name == "syncrep_cpu_seconds_per_commit"
                 and ("role", f"walsender:{who}") in labels_]
    (sender,) = [w for w in o["walsenders"] if w["standby"] == who]
    assert walsender == [pytest.approx(sender["cpu_us_per_commit"]["mean"] / 1e6,
                                       rel=1e-12)]
    # absent, with why, never zero: no anatomy was asked for
    assert ("syncrep_commit_part_seconds_count", (("part", "commit_wait"),)) not in got
    assert got[("syncrep_missing_info", (("application_name", ""),
                                         ("metric", "syncrep_commit_part_seconds"),
                                         ("reason", "observe without --anatomy")))] == 1


def test_openmetrics_when_asked(served: Served) -> None:
    text, kind = served.openmetrics
    assert kind.startswith("application/openmetrics-text"), kind
    names = {f.name for f in openmetrics_families(text)}  # type: ignore[no-untyped-call]
    assert {"syncrep_up", "syncrep_windows", "syncrep_missing",
            "syncrep_headroom_ratio"} <= names, names
    assert text.endswith("# EOF\n")


def test_textfile_holds_the_last_window_whole(served: Served) -> None:
    got = _samples(served.textfile.read_text())
    assert got[("syncrep_window_index", ())] == 2
    (o,) = served.windows[1]["windows"]
    assert got[("syncrep_writes_per_second", ())] == pytest.approx(o["writes_per_s"],
                                                                  rel=1e-12)
    # written beside itself and renamed: no temporary file stays in the folder
    assert sorted(p.name for p in served.textfile.parent.iterdir()
                  if p.suffix != ".sql") == ["syncrep.prom"]


def test_nothing_stays_after_the_last_window(served: Served) -> None:
    assert served.sessions_after == 0
    with pytest.raises(OSError):
        _scrape(served.url)


def test_the_dashboard_graphs_what_the_exporter_serves(served: Served) -> None:
    board = json.loads(DASHBOARD.read_text())
    assert board["schemaVersion"] >= 36  # Grafana 10's
    (source,) = [v for v in board["templating"]["list"] if v["type"] == "datasource"]
    assert source["query"] == "prometheus"
    got = _samples(served.scrape)
    known = {name for name, _ in got}
    known |= {dict(labels)["metric"] for name, labels in got
              if name == "syncrep_missing_info"}
    # a histogram is named in syncrep_missing_info by its family's name
    histograms = {n for n in known if n.endswith("_seconds") and n + "_count" not in known}
    known |= {f"{h}_{end}" for h in histograms for end in ("bucket", "sum", "count")}
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 8
    titles = " ".join(p["title"].lower() for p in board["panels"])
    for graphed in ("headroom", "ceiling", "writes", "lag", "commit"):
        assert graphed in titles, titles
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]
    for expr in exprs:
        names = set(re.findall(r"\bsyncrep_[a-z_]+", expr))
        assert names, expr
        assert names <= known, (expr, names - known)


def test_sigterm_ends_the_server_and_the_sessions(cluster: tuple[Path, str, str]) -> None:
    where, conninfo, _ = cluster
    proc = _observer("--dir", str(where), "--seconds", "30", "--serve", "127.0.0.1:0", "--json")
    said: list[str] = []
    url = _address(proc, said)
    text, _ = _scrape(url)
    assert _samples(text)[("syncrep_up", ())] == 0  # no window has ended yet
    assert "no window has ended yet" in text
    wait_until(lambda: _sessions(conninfo) == 1, 20, "the observer's session")
    # its own scratch folder (another observer's, of a run beside this one, is not its)
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    wait_until(lambda: any(tmp.glob(f"syncrep-lab-serve-{proc.pid}-*")), 20,
               "the observer's scratch folder")
    scratch = set(tmp.glob(f"syncrep-lab-serve-{proc.pid}-*"))
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    assert _sessions(conninfo) == 0
    with pytest.raises(OSError):
        _scrape(url)
    assert not [p for p in scratch if p.exists()]


def test_an_address_in_use_is_refused_before_connecting() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = cli_here("observe", "host=/nonexistent dbname=x", "--serve",
                       f"127.0.0.1:{port}")
    assert res.returncode != 0
    assert f"--serve 127.0.0.1:{port}: the address is in use" in res.stderr, res.stderr
    assert "fix: stop what listens there" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(("args", "said", "fix"), [
    (["--serve", "9187"], "--serve '9187' is not HOST:PORT", "give HOST:PORT"),
    (["--serve", "localhost:http"], "is not HOST:PORT", "give HOST:PORT"),
    (["--serve", "127.0.0.1:70000"], "is not HOST:PORT", "give HOST:PORT"),
    (["--serve", "::1:9187"], "is not HOST:PORT", "put an IPv6 address in brackets"),
    (["--serve", "203.0.113.9:9187"], "--serve 203.0.113.9:9187: cannot listen there",
     "give an address of this machine"),
    (["--textfile", "/nonexistent/dir/syncrep.prom"], "the folder /nonexistent/dir does "
     "not exist", "create it"),
    (["--textfile", "/tmp"], "--textfile /tmp is a folder", "give a file path"),
    (["--serve", ":0", "--windows", "0"], "--windows 0 is below one", "give how many"),
    (["--serve", ":0", "--anatomy"], "the commit anatomy is attached for at most",
     "add --windows N"),
])
def test_bad_input_is_refused_with_the_fix(args: list[str], said: str, fix: str) -> None:
    res = cli_here("observe", "host=/nonexistent dbname=x", *args)
    assert res.returncode == 2, res.stdout + res.stderr
    assert said in res.stderr, res.stderr
    assert f"fix: {fix}" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_a_textfile_folder_not_writable_is_refused() -> None:
    root = shared_tmp("srl-textfile-")  # reachable by nobody, writable by root only
    folder = root / "collector"
    folder.mkdir(mode=0o755)
    def checked() -> str:
        check(ObserveOptions("host=/nonexistent"),
              ServeOptions(None, folder / "syncrep.prom", None))
        return "accepted"

    said = as_nobody(checked, answers=(UserError,))
    assert said.startswith(f"--textfile {folder}/syncrep.prom: cannot write in {folder} "
                           "(Permission denied)"), said
    assert "fix: give a folder this user may write in" in said
    shutil.rmtree(root)


def test_a_standby_that_is_not_streaming_is_refused(cluster: tuple[Path, str, str]) -> None:
    _, conninfo, standby = cluster
    with psycopg.connect(standby, autocommit=True) as conn:
        row = conn.execute("show primary_conninfo").fetchone()
        assert row is not None
        was = str(row[0])

        def receiving() -> bool:
            found = conn.execute("select count(*) from pg_stat_wal_receiver "
                                 "where status = 'streaming'").fetchone()
            return found is not None and int(found[0]) > 0

        conn.execute("alter system set primary_conninfo = ''")
        conn.execute("select pg_reload_conf()")
        try:
            wait_until(lambda: not receiving(), 20, "the WAL receiver to stop")
            res = cli("observe", conninfo, "--standby", f"b={standby}", "--seconds", "2")
        finally:
            conn.execute(sql.SQL("alter system set primary_conninfo = {}").format(
                sql.Literal(was)))
            conn.execute("select pg_reload_conf()")
            wait_until(receiving, 30, "the WAL receiver to stream again")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "--standby b: " in res.stderr and ("is in recovery but not streaming from a "
                                              "primary") in res.stderr, res.stderr
    assert "fix: check its primary_conninfo" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(("version_num", "freezes"), [
    (90624, False),  # no lag columns before 10
    (100023, True), (110022, True), (120022, True),  # ended before the fix
    (130022, True), (130023, False), (140019, True), (140020, False),
    (150014, True), (150015, False), (160010, True), (160011, False),
    (170006, True), (170007, False), (180000, True), (180001, False), (180006, False),
    (190000, False)])
def test_the_view_lags_freeze_before_the_fix(version_num: int, freezes: bool) -> None:
    assert lag_columns_may_freeze(version_num) is freezes


def _positions(replay_moves: bool) -> Positions:
    """10 s of WAL at 1 MB/s sampled at 10 Hz, a standby 2 ms behind on write and
    flush; its replay following, or stalled from the start at 1 MB."""
    kept = Positions()
    for i in range(101):
        at, lsn = i / 10, 1e6 + i * 1e5
        behind = lsn - 2e-3 * 1e6
        replay = behind if replay_moves else 1e6
        kept.record(at, [(1, "b", "sync", None, None, None, None, lsn, lsn, behind, behind,
                          replay)])
    return kept


def test_lags_from_positions_and_when_the_view_may_be_stale() -> None:
    (flowing,) = _positions(True).window(0, 10, 170006)
    # 2 ms behind (its first sample is behind the positions kept: left out)
    assert flowing.lag_s["write"] == pytest.approx(2e-3)
    assert not flowing.replay_stalled and not flowing.stale
    (stalled,) = _positions(False).window(0, 10, 170006)
    assert stalled.replay_stalled and stalled.stale
    assert stalled.reason is not None and "883a95646a8" in stalled.reason
    # replay at the window's start: 0 s behind then, 10 s at the end, 5 s on average
    assert stalled.lag_s["replay"] == pytest.approx(5.0, rel=0.01)
    assert stalled.lag_s["flush"] == pytest.approx(flowing.lag_s["flush"])
    (fixed,) = _positions(False).window(0, 10, 170007)
    assert fixed.replay_stalled and not fixed.stale and fixed.reason is None


def test_a_stalled_replay_gets_its_lag_from_positions(
        cluster: tuple[Path, str, str], pg18: Installation, tmp_path: Path) -> None:
    where, conninfo, standby = cluster
    # asynchronous commits: a paused replay holds no commit back
    bench = _pgbench(pg18, conninfo, 30, tmp_path / "w.sql", level="local")
    paused = threading.Event()

    def pause() -> None:
        # once the observer samples: its positions begin before replay stops
        wait_until(lambda: _sessions(conninfo) == 1, 30, "the observer's session")
        time.sleep(1.5)
        with psycopg.connect(standby, autocommit=True) as conn:
            conn.execute("select pg_wal_replay_pause()")
        paused.set()

    pauser = threading.Thread(target=pause)
    try:
        pauser.start()
        res = cli("observe", "--dir", str(where), "--seconds", "6", "--slice", "1",
                  "--out", str(tmp_path / "o"), "--json", timeout=60)
    finally:
        pauser.join()
        with psycopg.connect(standby, autocommit=True) as conn:
            conn.execute("select pg_wal_replay_resume()")
        bench.terminate()
        bench.communicate(timeout=60)
    assert paused.is_set()
    assert res.returncode == 0, res.stderr
    found = json.loads(res.stdout)
    (lag,) = found["lags"]
    assert lag["replay_stalled"] is True, lag
    assert lag["write_lsn"] > lag["replay_lsn"], lag
    # 18.6 carries the fix: stalled, not stale
    assert lag["lags_may_be_stale"] is False and lag["reason"] is None
    by = lag["lag_from_positions_s"]
    # replay stood still for the window's last ~4 s: ~2 s behind on average over the
    # window's samples (0 before the pause); write and flush kept up: a fraction of
    # that (a few hundredths of a second here, 0.25 s beside other tests' load)
    assert 0.8 < by["replay"] < 4.0, by
    assert by["write"] < 0.25 * by["replay"] and by["flush"] < 0.25 * by["replay"], by
    # the view's replay lag grew as well (with the fix it does not freeze)
    (window,) = found["windows"]
    (view,) = window["replication"]
    assert view["replay_max_ms"] > 1000, view
    assert not math.isnan(by["replay"])


def test_anatomy_bins_become_fixed_octave_buckets() -> None:
    from syncrep_lab.observe.metrics import BUCKETS_NS, _buckets

    # two bins an octave (µs): 3 events in 2-2.83 µs, 5 in 2.83-4, 7 in 64-90.5
    bins = [(2.048, 2.896, 3), (2.896, 4.096, 5), (65.536, 92.682, 7)]
    got = dict(_buckets(bins, 16))  # one event beyond every bin
    assert len(got) == len(BUCKETS_NS) + 1
    assert got["2.048e-06"] == 0
    assert got["4.096e-06"] == 8  # both bins of that octave, whole
    assert got["6.5536e-05"] == 8
    assert got["0.000131072"] == 15
    assert got["+Inf"] == 16
    counts = [got[repr(le / 1e9)] for le in BUCKETS_NS]
    assert counts == sorted(counts)  # cumulative


def test_the_primarys_positions_are_kept_ten_minutes_only() -> None:
    kept = Positions(hz=1.0)
    for second in range(3000):  # moved to the front of its arrays twice
        kept.record(float(second), [(1, "b", "sync", None, None, None, None,
                                     1e6 * second, 0.0, 0.0, 0.0, 0.0)])
    assert 600 <= len(kept) <= 611
    assert kept.times[kept.start] >= 2999 - 611
    # made whole at first (1 Hz: room for 1,220 samples) and never reallocated
    assert len(kept.times) == len(kept.primary) == kept.capacity == 1220
    assert kept.passed(1e6 * 2900.5) == 2900.5
    assert kept.passed(1e6 * 2000) is None  # before the positions kept
