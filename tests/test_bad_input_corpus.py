"""A corpus of bad input, run through the real command line.

Every spec in tests/data/bad_input/ is wrong in one way; SPECS below says what the
message must name (and the line, where the spec has one). The other cases are
command lines (a spec that is not a file, flags of ``cluster up``, folders that are
not runs). For each: exit code 2, an ``error:`` line naming the cause, a ``fix:``
line, no traceback, and nothing made: no run folder, no cluster registered.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .helpers import cli_here, machine_wide

# every case compares what `clean --list` lists before and after it
pytestmark = machine_wide

DATA = Path(__file__).parent / "data" / "bad_input"

# name -> (fragments the error must hold, the line it must name or None)
SPECS: dict[str, tuple[list[str], int | None]] = {
    # a wrong type for each section's keys
    "type_name": (["name: Input should be a valid string"], 1),
    "type_description": (["description: Input should be a valid string"], 2),
    "type_section": (["topology: Input should be a valid dictionary"], 2),
    "type_topology_pg": (["topology.pg: Input should be a valid string"], 4),
    "type_topology_standbys": (["topology.standbys: Input should be a valid integer"], 4),
    "type_topology_names": (["topology.names: Input should be a valid list"], 4),
    "type_topology_sync": (["topology.sync: Input should be a valid string"], 4),
    "type_topology_tcp": (["topology.tcp: Input should be a valid boolean"], 4),
    "type_topology_profile": (["topology.profile: Input should be 'benchmark' or 'seed'"], 4),
    "type_topology_clone": (["topology.clone: Input should be 'copy' or 'basebackup'"], 4),
    "type_attach_primary": (["topology.attach.primary: Input should be a valid string"], 4),
    "type_attach_standbys": (["topology.attach.standbys: Input should be a valid dict"], 5),
    "type_attach_allow_alter": (["topology.attach.allow_alter: Input should be a valid "
                                 "boolean"], 5),
    "type_settings_value": (["settings.shared_buffers: Input should be a string, a number "
                             "or a boolean"], 4),
    "type_settings_date": (["settings.fsync: Input should be a string, a number or a "
                            "boolean"], 4),
    "type_settings_sets": (["settings_sets.fast: Input should be a valid dictionary"], 4),
    "type_workload_kind": (["workload.kind: Input should be 'insert', 'pk-lookup' or "
                            "'script'"], 4),
    "type_workload_batch": (["workload.batch: Input should be a valid integer"], 4),
    "type_workload_rows": (["workload.rows: Input should be a valid integer"], 5),
    "type_workload_script": (["workload.script: Input should be a valid string"], 5),
    "type_workload_clients": (["workload.clients: Input should be a valid integer"], 4),
    "type_workload_threads": (["workload.threads: Input should be a valid integer"], 4),
    "type_workload_duration": (["workload.duration: Input should be a valid integer"], 4),
    "type_workload_warmup": (["workload.warmup: Input should be a valid integer"], 4),
    "type_workload_synchronous_commit": (["workload.synchronous_commit: Input should be "
                                          "'off', 'local'"], 4),
    "type_workload_keep_logs": (["workload.keep_logs: Input should be a valid boolean"], 4),
    "type_matrix_scalar": (["matrix.clients: Input should be a valid list"], 4),
    "type_matrix_synchronous_commit": (["matrix.synchronous_commit[1]: Input should be "
                                        "'off'"], 4),
    "type_matrix_sync": (["matrix.sync[0]: Input should be a valid string"], 4),
    "type_matrix_standbys": (["matrix.standbys[0]: Input should be a valid integer"], 4),
    "type_matrix_pg": (["matrix.pg[0]: Input should be a valid string"], 4),
    "type_matrix_settings": (["matrix.settings: Input should be a valid list"], 4),
    "type_matrix_exclude": (["matrix.exclude[0]: Input should be a valid dictionary"], 5),
    "type_run_repeats_min": (["run.repeats_min: Input should be a valid integer"], 4),
    "type_run_ci_target": (["run.ci_target: Input should be a valid number"], 4),
    "type_run_confidence": (["run.confidence: Input should be less than 1"], 4),
    "type_run_ready_timeout": (["run.ready_timeout: Input should be a valid number"], 4),
    "type_probes_perf": (["probes.perf: Input should be a valid boolean"], 4),
    "type_probes_hz": (["probes.wait_events_hz: Input should be a valid number"], 4),
    "type_probes_sched_seconds": (["probes.sched_seconds: Input should be greater than 0"], 4),
    "type_reference": (["reference: Input should be a valid dictionary"], 2),
    "type_faults": (["faults.stop_b: Input should be a valid dictionary"], 4),
    "nested_wrongly": (["workload.matrix: unknown key ([matrix] is a section of its own, "
                        "not inside [workload])"], 3),
    # unknown keys, with the nearest known ones
    "unknown_top": (["nmae: unknown key (did you mean name?)", "name: Field required"], 1),
    "unknown_section": (["topolgy: unknown key (did you mean topology?)"], 3),
    "unknown_workload": (["workload.client: unknown key (did you mean clients?)"], 4),
    "unknown_matrix": (["matrix.client: unknown key (did you mean clients"], 4),
    "unknown_run": (["run.repeats: unknown key (did you mean repeats_min or repeats_max?)"],
                    4),
    "unknown_probes": (["probes.pref: unknown key (did you mean perf or gprof?)"], 4),
    "unknown_attach": (["topology.attach.primay: unknown key (did you mean primary?)"], 4),
    "unknown_no_hint": (["workload.zzz: unknown key"], 4),
    "unknown_exclude_axis": (["matrix.exclude[0]: 'color' is not an axis (axes: pg,"], 5),
    # absurd values
    "negative_clients": (["workload.clients: Input should be greater than or equal to 1"], 4),
    "zero_duration": (["workload.duration: Input should be greater than or equal to 1"], 4),
    "repeats_min_over_max": (["run.repeats_min: repeats_min 5 > repeats_max 2"], 4),
    "ci_target_5": (["run.ci_target: Input should be less than 1"], 4),
    "ci_target_nan": (["run.ci_target: Input should be less than 1"], 4),
    "ready_timeout_inf": (["run.ready_timeout: Input should be less than or equal to 3600"],
                          4),
    "million_clients": (["workload.clients: Input should be less than or equal to 10000"], 4),
    "million_clients_axis": (["matrix.clients[1]: Input should be less than or equal to "
                              "10000"], 4),
    "huge_integer": (["workload.duration: Input should be less than or equal to 86400"], 4),
    "clients_over_max_connections": (["1000 clients need max_connections >= 1005, the "
                                      "server gets 300"], 4),
    "max_connections_not_a_number": (["settings.max_connections: max_connections = 'lots' "
                                      "is not a whole number"], 4),
    "max_connections_in_set": (["settings_sets.small.max_connections: max_connections = "
                                "'on' is not a whole number"], 4),
    "standbys_25": (["topology.standbys: Input should be less than or equal to 24"], 4),
    "names_too_few": (["topology.names: 2 names for 3 standbys"], 5),
    "names_repeat": (["topology.names: standby names repeat"], 4),
    "names_unusable": (["topology.names: standby name 'primary' is not usable"], 4),
    "many_errors": (["matrix.clients[0]: Input should be greater than or equal to 1",
                     "... and 480 more"], 4),
    "matrix_10_million": (["matrix: 10000000 cells is more than 5000; split the spec or "
                           "use exclude/only"], 3),
    "matrix_10_million_filtered": (["matrix: 10000000 cells before exclude/only is more "
                                    "than 100000"], 3),
    # a line of 20,000 blanks after '[' inside a string once took minutes to map to lines
    "header_line_of_blanks": (["name: String should match pattern"], 1),
    # empty axes and plans
    "empty_axis": (["matrix.clients: an axis needs at least one value (leave it out "
                    "instead)"], 4),
    "empty_sync_axis": (["matrix.sync: an axis needs at least one value"], 4),
    "empty_after_filters": (["matrix: the matrix is empty after exclude/only"], 3),
    # impossible combinations
    "remote_apply_no_standby": (["synchronous_commit = remote_apply with no synchronous "
                                 "standby would silently mean 'local'"], 7),
    "batch_with_lookup": (["workload.batch: batch applies to kind 'insert', not "
                           "'pk-lookup'"], 5),
    "script_without_file": (["workload.script: kind = 'script' needs script = 'file.sql'"],
                            3),
    "undefined_settings_set": (["matrix.settings: no settings set 'fast' (define "
                                "[settings_sets.fast], or [nodes.NODE.sets.fast] for one "
                                "node)"], 4),
    "attach_varies_pg": (["matrix.pg: cannot vary pg of an attached cluster"], 7),
    "attach_bad_conninfo": (["topology.attach.primary: unterminated quoted string"], None),
    # synchronous_standby_names
    "sync_does_not_parse": (["topology.sync: single cell: synchronous_standby_names "
                             "'ANY 1 (' does not parse: expected NAME or NUM"], 4),
    "sync_names_no_standby": (["'1(x, y)' names no standby of this cluster (standbys: b, "
                               "c)"], 4),
    "sync_needs_more": (["matrix.sync: sync=3 (b, c): synchronous_standby_names '3 (b, c)' "
                         "needs 3 synchronous standbys but only 2"], 4),
    # TOML that does not parse
    "toml_unclosed_header": (["not TOML: Expected ']' at the end of a table declaration"], 3),
    "toml_duplicate_key": (["not TOML: Cannot overwrite a value"], 2),
    "toml_missing_value": (["not TOML: Invalid value"], 4),
    "toml_unterminated_string": (["not TOML: Illegal character"], 2),
    "toml_bad_escape": (["not TOML: Unescaped '\\' in a string"], 2),
    "toml_redefined_table": (["not TOML: Cannot declare ('run',) twice"], 6),
    "not_utf8": (["not UTF-8 (byte 0xe9 at offset 31)", "save the spec as UTF-8"], 2),
    # what is installed here (preflight, before the run folder)
    "pg_not_installed": (["PostgreSQL 11 is not installed here", "fix: syncrep-lab pg fetch "
                          "11"], None),
    "pg_not_a_dir": (["--pg /nonexistent/pg/bin: no such directory"], None),
    "sync_any_on_96": (["needs PostgreSQL 10"], None),
    # placement, links, instances, hosts
    "placement_cpus_garbage": (["placements.p.cpus.primary:", "one-two"], 4),
    "placement_unknown_node": (["placements.p.cpus.z: 'z' is not a node"], 4),
    "placement_unknown_role": (["placements.p.pin.walsendr: 'walsendr' is not a role"], 4),
    "placement_not_defined": (["no placement 'nowhere' (define [placements.nowhere])"], 4),
    "build_unused": (["builds.pg18-slow: build 'pg18-slow' is not used",
                      "matrix.pg or topology.pg"], 3),
    "build_bad_name": (["builds.18: the build name '18' is not a usable build name"], 3),
    "build_missing_patch": (["builds.pg18-slow.patches[0]:", "no-such.patch: no such file",
                             "from the spec's folder"], None),
    "build_flavor": (["builds.pg18-slow.flavor: Input should be 'release'"], 5),
    "build_configure": (["builds.pg18-seed: configure '--prefix=/opt/pg': the build sets "
                         "that itself"], 3),
    "quota_on_postmaster": (["placements.p.quota.postmaster: 'postmaster' is not a role a "
                             "quota can hold", "children would start in its quota"], 4),
    "quota_unknown_standby": (["placements.p.quota.walsender:z: 'walsender:z'",
                               "'z' is not one (b, c)"], 7),
    "quota_too_small": (["placements.p.quota.walsender:b: a share of 0.0001 CPUs",
                         "the kernel's 1 ms quota"], 4),
    "numa_policy_unknown": (["placements.p.numa.primary:", "scatter"], 4),
    "link_not_defined": (["no link profile 'moon' (define [links.moon])"], 4),
    "link_rate_zero": (["links.dead:", "rate"], 3),
    "link_loss_100": (["links.void.loss_pct: Input should be less than 100"], 4),
    "instances_with_faults": (["topology.instances: fault scenarios act on one instance"],
                              4),
    "host_not_defined": (["topology.hosts.c: no host 'nowhere' (define [hosts.nowhere])"],
                         5),
    "host_with_copy": (["with a node on another host, the standbys are made with "
                        "pg_basebackup"], 4),
    "host_with_links": (["topology.hosts: emulated links are veth pairs between this "
                         "machine's network namespaces", "leave out [network] and "
                         "matrix.link, or the hosts"], 5),
    "socket_standby_on_host": (["network.standby_links.c: c runs on SSH host far, which the "
                                "primary's unix socket does not reach"], 8),
    "link_fault_without_links": (["link changes an emulated link"], 7),
    # what this machine has (preflight)
    "placement_cpu_outside": (["placements.wide: primary: CPUs", "not on this machine"], None),
    "numa_node_missing": (["bind=3", "node 3 not on this machine (it has node 0)"], 4),
    "cores_more_than_machine": (["matrix.cores: 4096 cores"], None),
}

# the spec must be refused this fast (seconds, the whole command line)
QUICK = {"matrix_10_million": 10.0, "matrix_10_million_filtered": 10.0,
         "header_line_of_blanks": 10.0, "many_errors": 10.0}


def test_every_corpus_file_has_a_case() -> None:
    assert {p.stem for p in DATA.glob("*.toml")} == set(SPECS)


def _refused(res: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2, the cause (the first needle) on the error: line(s), a fix: line, no
    traceback; the other needles anywhere in the message."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr + res.stdout, res.stderr
    assert res.stderr.startswith("error: "), res.stderr
    cause, _, fix = res.stderr.partition("\nfix: ")
    assert fix.strip(), res.stderr
    assert needles[0] in cause, res.stderr
    for needle in needles[1:]:
        assert needle in res.stderr, res.stderr


NothingMade = Callable[..., None]


@pytest.fixture
def nothing_made(nothing_new_to_clean: Callable[[], None]) -> NothingMade:
    """``nothing_made(*paths)``: none of the paths exists, and ``clean --list`` lists what
    it listed when the test began."""
    def check(*paths: Path) -> None:
        for path in paths:
            assert not path.exists(), f"{path} was created"
        nothing_new_to_clean()

    return check


@pytest.mark.parametrize("name", sorted(SPECS))
def test_bad_spec(name: str, workdir: Path, request: pytest.FixtureRequest,
                  nothing_made: NothingMade) -> None:
    if name == "sync_any_on_96":
        request.getfixturevalue("pg96")  # the refusal is 9.6's own: it must be here
    needles, line = SPECS[name]
    spec = DATA / f"{name}.toml"
    out = workdir / "never"
    started = time.monotonic()
    res = cli_here("run", str(spec), "--out", str(out))
    elapsed = time.monotonic() - started
    _refused(res, *needles)
    if line is not None:
        assert f"{spec}:{line}:" in res.stderr, res.stderr
    assert elapsed < QUICK.get(name, 30.0)
    nothing_made(out)


def test_spec_path_that_does_not_exist(workdir: Path, nothing_made: NothingMade) -> None:
    res = cli_here("run", str(workdir / "nope.toml"), "--out", str(workdir / "never"))
    _refused(res, f"no spec file {workdir / 'nope.toml'}", "--preset quick|seed")
    nothing_made(workdir / "never")


def test_spec_path_that_is_a_directory(workdir: Path, nothing_made: NothingMade) -> None:
    res = cli_here("run", str(DATA), "--out", str(workdir / "never"))
    _refused(res, f"{DATA} is a directory, not a spec file", "give the path of a .toml file")
    nothing_made(workdir / "never")


def test_spec_path_with_spaces_and_unicode(workdir: Path,
                                           nothing_made: NothingMade) -> None:
    """Such a path is named in the message as it is."""
    folder = workdir / "my specs ü"
    folder.mkdir()
    spec = folder / "bad spec é.toml"
    spec.write_bytes((DATA / "negative_clients.toml").read_bytes())
    res = cli_here("run", str(spec), "--out", str(workdir / "never"))
    _refused(res, f"{spec}:4: workload.clients")
    nothing_made(workdir / "never")


def test_out_with_spaces_and_unicode_is_accepted(workdir: Path,
                                                 nothing_made: NothingMade) -> None:
    """Such an --out is no bad input: the spec is checked through preflight and the plan
    shown (`run --check`), and nothing is made. (tests/test_security.py runs a real run
    into such a folder.)"""
    out = workdir / "runs with space" / "é ü 名前"
    res = cli_here("run", "--preset", "quick", "--out", str(out), "--check")
    assert res.returncode == 0, res.stderr
    assert "spec quick is valid: 12 cells on 1 cluster" in res.stdout
    assert f"nothing was created; run it into {out} without --check" in res.stdout
    nothing_made(out.parent)


def test_out_that_is_a_file(workdir: Path, nothing_made: NothingMade) -> None:
    a_file = workdir / "a file"
    a_file.write_text("mine\n")
    res = cli_here("run", "--preset", "quick", "--out", str(a_file))
    _refused(res, f"--out {a_file} is not a directory", "choose a folder for the run")
    assert a_file.read_text() == "mine\n"
    res = cli_here("run", "--preset", "quick", "--out", str(a_file / "run"))
    _refused(res, f"{a_file} is a file, not a directory")
    assert a_file.read_text() == "mine\n"
    nothing_made()


def test_resume_of_a_folder_without_a_run(workdir: Path, nothing_made: NothingMade) -> None:
    empty = workdir / "empty"
    empty.mkdir()
    res = cli_here("run", "--resume", "--out", str(empty))
    _refused(res, f"{empty} holds no run to resume", "syncrep-lab run SPEC --out")
    assert list(empty.iterdir()) == []
    res = cli_here("run", "--resume", "--out", str(workdir / "missing"))
    _refused(res, "holds no run to resume")
    res = cli_here("run", "--resume")
    _refused(res, "--resume needs the run folder")
    nothing_made(workdir / "missing")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--standbys", "-1"], ["--standbys -1: must be 0 to 24"]),
        (["--standbys", "99"], ["--standbys 99: must be 0 to 24"]),
        (["--port", "70000"], ["--port 70000: ports 70000-70002 are not all in 1024-65535"]),
        (["--port", "80"], ["ports 80-82 are not all in 1024-65535"]),
        (["--set", "foo=bar"], ["--set foo: this PostgreSQL knows no such setting"]),
        (["--set", "max_conections=9"], ["--set max_conections: this PostgreSQL knows no "
                                         "such setting", "did you mean max_connections"]),
        (["--timeout", "nan"], ["--timeout nan: must be positive"]),
        (["--timeout", "-1"], ["--timeout -1.0: must be positive"]),
        (["--pg", "11"], ["PostgreSQL 11 is not installed", "fix: syncrep-lab pg fetch 11"]),
        (["--sync", "FIRST 3 (b, c)"], ["needs 3 synchronous standbys"]),
    ],
)
def test_bad_cluster_up_flags(args: list[str], needles: list[str], workdir: Path,
                              nothing_made: NothingMade) -> None:
    cluster = workdir / "c"
    res = cli_here("cluster", "up", "--dir", str(cluster), *args)
    _refused(res, *needles)
    nothing_made(cluster)


FOLDERS = ["empty", "missing", "a file", "empty store", "not sqlite"]
COMMANDS = ["results", "costs", "report", "diagnose", "scaling"]


@pytest.mark.parametrize(
    ("command", "folder"),
    sorted({("results", f) for f in FOLDERS} | {(c, "empty store") for c in COMMANDS}
           | {(c, "missing") for c in COMMANDS}),
)
def test_analysis_of_a_folder_that_is_not_a_run(command: str, folder: str, workdir: Path,
                                                 nothing_made: NothingMade) -> None:
    target = workdir / folder
    if folder == "empty":
        target.mkdir()
    elif folder == "a file":
        target.write_text("not a run\n")
    elif folder in ("empty store", "not sqlite"):
        target.mkdir()
        (target / "syncrep-lab.sqlite").write_bytes(b"" if folder == "empty store"
                                                   else b"garbage, not SQLite\n" * 10)
    before = sorted(p.name for p in target.iterdir()) if target.is_dir() else None
    res = cli_here(command, str(target))
    needle = ("is not a syncrep-lab run store" if "store" in folder or "sqlite" in folder
              else "is not a syncrep-lab run folder")
    _refused(res, needle, "give the folder a run was written to")
    if before is not None:  # nothing written into it (no report.html, no WAL files)
        assert sorted(p.name for p in target.iterdir()) == before
    nothing_made()
