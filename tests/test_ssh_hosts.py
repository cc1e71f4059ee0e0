"""The SSH host layer against a real OpenSSH server (tests/sshd.py): commands,
files, detached processes, host key verification, the failures a user can
cause, and a PostgreSQL server driven on the "remote host" end to end."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from syncrep_lab.errors import ClusterFailure, UserError
from syncrep_lab.hosts.dirs import remove_dir
from syncrep_lab.hosts.postmaster import start_postgres, stop_postgres
from syncrep_lab.hosts.snapshots import proc_snapshot
from syncrep_lab.hosts.ssh import SshHost, check_host

from .sshd import SshdHost, make_key, sshd_host

# The harness's module-scoped fixture: one sshd for all the tests here.
remote = sshd_host

BIN = "/usr/lib/postgresql/15/bin"
PG_PORT = 5432  # inside the namespace, where nothing else listens


@pytest.fixture
def host(remote: SshdHost) -> Iterator[SshHost]:
    with SshHost(remote.spec()) as connected:
        yield connected


def wait_until_dead(host: SshHost, pid: int, bound: float) -> float:
    start = time.monotonic()
    while host.alive(pid):
        assert time.monotonic() - start < bound, f"pid {pid} still alive after {bound} s"
        time.sleep(0.05)
    return time.monotonic() - start


# --- commands, files, processes ---------------------------------------------------------


def test_run_as_the_login_account(host: SshHost, remote: SshdHost) -> None:
    assert host.run(["id", "-un"]).stdout.strip() == remote.user
    # argv is quoted for the remote shell: nothing in it is expanded there.
    tricky = "a b; echo $HOME 'q' \"d\" *"
    assert host.run(["printf", "%s", tricky]).stdout == tricky
    assert host.run(["cat"], input="line one\nline two\n").stdout == "line one\nline two\n"


def test_failing_command_names_host_command_and_stderr(host: SshHost) -> None:
    result = host.run(["sh", "-c", "echo oops >&2; exit 3"], check=False)
    assert (result.returncode, result.stderr) == (3, "oops\n")
    with pytest.raises(UserError) as caught:
        host.run(["ls", "/no/such/dir"])
    text = str(caught.value)
    assert "remote" in text and "ls /no/such/dir" in text and "No such file" in text
    with pytest.raises(UserError, match="program is missing"):
        host.run(["no-such-program-srl"])


def _running(cmdline: bytes) -> list[int]:
    """Live processes with this exact command line (the "remote host" is this machine)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry / "cmdline").read_bytes() != cmdline:
                continue
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(entry.name))
        except (OSError, IndexError):
            continue
    return found


def test_run_timeout_is_bounded_and_kills(host: SshHost) -> None:
    start = time.monotonic()
    with pytest.raises(UserError, match="did not finish within 1 s"):
        host.run(["sh", "-c", "sleep 31.25; true"], timeout=1)
    assert time.monotonic() - start < 4
    deadline = time.monotonic() + 3
    while _running(b"sleep\x0031.25\x00"):
        assert time.monotonic() < deadline, "the timed-out command is still running"
        time.sleep(0.05)
    assert host.run(["true"]).returncode == 0  # the connection is still usable


def test_put_text_get_bytes_round_trip(host: SshHost, remote: SshdHost) -> None:
    path = f"{remote.data_root}/files/conf.txt"
    host.run(["mkdir", "-p", f"{remote.data_root}/files"])
    text = "shared_buffers = '128MB'\n# naïve ünïcode ✓\n" * 50
    host.put_text(path, text, mode=0o640)
    assert host.get_bytes(path) == text.encode()
    assert host.run(["stat", "-c", "%a %U", path]).stdout.split() == ["640", remote.user]
    host.put_text(path, "replaced\n")  # overwrite, default mode
    assert host.get_bytes(path) == b"replaced\n"
    assert host.run(["stat", "-c", "%a", path]).stdout.strip() == "600"
    assert host.run(["ls", f"{remote.data_root}/files"]).stdout.split() == ["conf.txt"]
    with pytest.raises(UserError, match="larger than 4 bytes"):
        host.get_bytes(path, limit=4)
    with pytest.raises(UserError, match="cannot read /no/such/file on remote"):
        host.get_bytes("/no/such/file")
    with pytest.raises(UserError, match="cannot write /proc/nope on remote"):
        host.put_text("/proc/nope", "x")


def test_detached_process_outlives_the_connection(remote: SshdHost) -> None:
    log = f"{remote.data_root}/sleep.log"
    with SshHost(remote.spec()) as first:
        pid = first.spawn_detached(["sleep", "60"], log, cwd=remote.data_root)
        assert first.alive(pid)
        # empty while its exec is under way (seen once in a loaded suite): read again
        deadline = time.monotonic() + 10
        while not (cmdline := first.get_bytes(f"/proc/{pid}/cmdline")) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        assert cmdline == b"sleep\x0060\x00"
    # A new connection: the process did not go with the old one.
    with SshHost(remote.spec()) as second:
        assert second.alive(pid)
        second.kill(pid)
        assert wait_until_dead(second, pid, 5) < 5
        assert not second.alive(pid)
        second.kill(pid)  # already gone: not an error
        with pytest.raises(UserError, match="program is missing"):
            second.spawn_detached(["no-such-program-srl"], log)
    try:  # seen from here too: gone, or a zombie waiting for init to reap it
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z")


# --- host keys ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["ed25519", "rsa"])
def test_host_key_mismatch_is_loud(remote: SshdHost, tmp_path: Path, kind: str) -> None:
    """Another key on record for the host, of the server's type or of one it does
    not have at all (which must not read as a network failure)."""
    other = make_key(tmp_path / "impostor", kind=kind)
    algorithm, blob = Path(f"{other}.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"[{remote.address}]:{remote.port} {algorithm} {blob}\n")
    for accept_new in (False, True):  # trust on first use never covers a changed key
        with pytest.raises(UserError) as caught:
            SshHost(remote.spec(known_hosts=str(known), accept_new=accept_new)).connect()
        text = str(caught.value)
        assert "HOST KEY MISMATCH" in text and "man-in-the-middle" in text
        assert "SHA256:" in text and "(ssh-ed25519)" in text and str(known) in text
    assert known.read_text().count("\n") == 1  # nothing was added


def test_unknown_host_key_says_how_to_add_it(remote: SshdHost, tmp_path: Path) -> None:
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    for path in (empty, tmp_path / "missing_known_hosts"):
        with pytest.raises(UserError) as caught:
            SshHost(remote.spec(known_hosts=str(path))).connect()
        text = str(caught.value)
        assert "not known" in text and "MISMATCH" not in text
        assert f"ssh-keyscan -p {remote.port} {remote.address} >> {path}" in text
    assert not (tmp_path / "missing_known_hosts").exists()


def test_accept_new_records_the_key(remote: SshdHost, tmp_path: Path) -> None:
    path = tmp_path / "sub" / "known_hosts"
    with SshHost(remote.spec(known_hosts=str(path), accept_new=True)) as host:
        assert host.run(["id", "-un"]).stdout.strip() == remote.user
    assert path.read_text() == remote.host_key_line + "\n"
    assert path.stat().st_mode & 0o777 == 0o600
    with SshHost(remote.spec(known_hosts=str(path))) as again:  # now simply known
        assert again.run(["true"]).returncode == 0
    assert path.read_text() == remote.host_key_line + "\n"


# --- failures a user can cause -------------------------------------------------------------


def test_refused_port_fails_fast_with_errno_text(remote: SshdHost) -> None:
    spec = remote.spec(port=remote.port + 1, connect_timeout=3.0)
    start = time.monotonic()
    with pytest.raises(UserError) as caught:
        SshHost(spec).connect()
    assert time.monotonic() - start < spec.connect_timeout + 2
    text = str(caught.value)
    assert f"cannot reach remote at {remote.address}:{remote.port + 1}" in text
    assert "Connection refused" in text or "Connect call failed" in text
    # The subnet's broadcast address: nobody can be there.
    nobody = remote.address.rsplit(".", 1)[0] + ".3"
    start = time.monotonic()
    with pytest.raises(UserError, match=f"cannot reach remote at {nobody}:{remote.port}: "):
        SshHost(remote.spec(address=nobody, connect_timeout=3.0)).connect()
    assert time.monotonic() - start < 3.0 + 2


def test_silent_peer_times_out_within_bound(remote: SshdHost) -> None:
    """A port that accepts TCP but never speaks SSH: the handshake must time out."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        port = silent.getsockname()[1]
        spec = remote.spec(address="127.0.0.1", port=port, connect_timeout=2.0)
        start = time.monotonic()
        with pytest.raises(UserError, match="timed out after 2 s"):
            SshHost(spec).connect()
        assert time.monotonic() - start < spec.connect_timeout + 2


def test_wrong_key_is_refused(remote: SshdHost, tmp_path: Path) -> None:
    wrong = make_key(tmp_path / "wrong")
    with pytest.raises(UserError) as caught:
        SshHost(remote.spec(key=str(wrong))).connect()
    text = str(caught.value)
    assert "refused authentication" in text and str(wrong) in text
    with pytest.raises(UserError, match="cannot be read"):
        SshHost(remote.spec(key=str(tmp_path / "no_such_key"))).connect()
    with pytest.raises(UserError, match="cannot be used: Invalid private key"):
        SshHost(remote.spec(key=f"{wrong}.pub")).connect()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret", "-f",
                    str(tmp_path / "locked")], check=True, capture_output=True)
    with pytest.raises(UserError, match="protected by a passphrase"):
        SshHost(remote.spec(key=str(tmp_path / "locked"))).connect()


# --- checking a host -------------------------------------------------------------------------


def test_check_host_reports_version(remote: SshdHost) -> None:
    facts = check_host(remote.spec(bin_dir=BIN))
    assert facts["postgres_version"].startswith("postgres (PostgreSQL) 15.")
    assert facts["version"].startswith("15.")
    assert facts["programs"]["pg_basebackup"] == f"{BIN}/pg_basebackup"
    assert 1 <= facts["nproc"] <= (os.cpu_count() or 1)
    assert facts["python3"] == "/usr/bin/python3"
    assert facts["uname"].startswith("Linux")


def test_check_host_names_a_missing_program(remote: SshdHost, host: SshHost) -> None:
    partial = f"{remote.data_root}/partial-bin"
    host.run(["mkdir", "-p", partial])
    for program in ("postgres", "pg_ctl"):
        host.run(["ln", "-sf", f"{BIN}/{program}", f"{partial}/{program}"])
    with pytest.raises(UserError) as caught:
        check_host(remote.spec(bin_dir=partial))
    text = str(caught.value)
    assert f"lacks pg_basebackup in {partial}" in text
    assert "pg_ctl" not in text.split("\n")[0]


# --- PostgreSQL on the remote host -----------------------------------------------------------


def _configure(host: SshHost, remote: SshdHost, data_dir: str) -> None:
    conf = host.get_bytes(f"{data_dir}/postgresql.conf").decode()
    host.put_text(f"{data_dir}/postgresql.conf", conf + "\n".join([
        f"listen_addresses = '{remote.address}'",
        f"port = {PG_PORT}",
        f"unix_socket_directories = '{data_dir}'",
        "fsync = off",
        "shared_buffers = 16MB",
        "",
    ]))
    hba = host.get_bytes(f"{data_dir}/pg_hba.conf").decode()
    host.put_text(f"{data_dir}/pg_hba.conf", hba + "host all all 10.214.0.0/16 trust\n")


def test_postgres_on_the_remote_host(remote: SshdHost, host: SshHost) -> None:
    data_dir = f"{remote.data_root}/n1"
    log = f"{remote.data_root}/n1.log"
    host.run([f"{BIN}/initdb", "-D", data_dir, "-A", "trust", "-N", "--no-instructions"],
             timeout=120)
    _configure(host, remote, data_dir)
    try:
        pid = start_postgres(host, BIN, data_dir, log)
        assert host.alive(pid)
        assert host.get_bytes(f"{data_dir}/postmaster.pid").split(b"\n")[0] == str(pid).encode()
        with pytest.raises(ClusterFailure, match="already runs"):
            start_postgres(host, BIN, data_dir, log)

        with psycopg.connect(host=remote.address, port=PG_PORT, user=remote.user,
                             dbname="postgres", connect_timeout=10) as conn:
            backend = conn.execute("select pg_backend_pid()").fetchone()
            assert backend is not None
            conn.execute("select count(*) from generate_series(1, 3000000)").fetchone()
            snap = proc_snapshot(host, data_dir)
            by_pid = {row["pid"]: row for row in snap}
            assert pid in by_pid and by_pid[pid]["title"].startswith(f"{BIN}/postgres -D")
            children = [row for row in snap if row["ppid"] == pid]
            titles = " | ".join(row["title"] for row in children)
            assert "checkpointer" in titles and "walwriter" in titles, titles
            mine = by_pid[backend[0]]
            assert mine["ppid"] == pid and f"{remote.user} postgres {remote.gateway}" in \
                mine["title"]
            assert mine["utime"] + mine["stime"] >= 5  # 3 million rows cost CPU: >= 50 ms
            assert mine["voluntary"] > 0
            assert all(row["clk_tck"] == os.sysconf("SC_CLK_TCK") for row in snap)
            assert all(row["cpus_allowed_list"] for row in snap)
            # The sh variant (hosts without python3) finds the same long-lived processes.
            by_sh = {row["pid"]: row for row in proc_snapshot(host, data_dir,
                                                              prefer_python=False)}
            for row in [*children, by_pid[pid]]:
                got = by_sh.get(row["pid"])
                assert got is not None and got["title"] == row["title"]
                assert got["utime"] >= row["utime"] and got["ppid"] == row["ppid"]
            assert by_sh[backend[0]]["utime"] + by_sh[backend[0]]["stime"] >= 5

        stop_postgres(host, BIN, data_dir)
        assert not host.alive(pid)
        assert proc_snapshot(host, data_dir) == []
        stop_postgres(host, BIN, data_dir)  # not running: nothing to do
    finally:
        stop_postgres(host, BIN, data_dir)

    remove_dir(host, data_dir)
    assert host.run(["test", "-e", data_dir], check=False).returncode == 1
    remove_dir(host, data_dir)  # already gone: fine


def test_start_postgres_failure_shows_the_log(remote: SshdHost, host: SshHost) -> None:
    data_dir = f"{remote.data_root}/broken"
    host.run(["mkdir", "-m", "700", "-p", data_dir])  # no cluster in it
    try:
        with pytest.raises(ClusterFailure) as caught:
            start_postgres(host, BIN, data_dir, f"{remote.data_root}/broken.log", timeout=20)
        assert "exited while starting" in str(caught.value)
        assert "postgresql.conf" in str(caught.value)  # the log's own words
    finally:
        remove_dir(host, data_dir)


def test_remote_server_never_ready_shows_its_log_from_the_host(remote: SshdHost,
                                                               host: SshHost) -> None:
    """The wait for a standby on an SSH host ends at the deadline with the end of the
    log that lives on that host, fetched over SSH."""
    from syncrep_lab.cluster.ready import wait_ready
    from syncrep_lab.cluster.remote_node import log_tail

    data = f"{remote.data_root}/silent"
    host.put_text(f"{data}.log", "".join(f"line {i}\n" for i in range(40))
                  + "FATAL:  the last words of the log\n")
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # closed again: nothing listens there
    start = time.monotonic()
    with pytest.raises(ClusterFailure) as caught:
        wait_ready(f"host=127.0.0.1 port={port} user=postgres dbname=postgres", None,
                   lambda: log_tail(remote.spec(), data), time.monotonic() + 1.5,
                   "standby c on far")
    assert time.monotonic() - start < 15
    text = str(caught.value)
    assert "standby c on far did not accept connections in time" in text
    assert "FATAL:  the last words of the log" in text and "line 21" in text
    assert "line 20\n" not in text  # only the end of it
    missing = log_tail(remote.spec(), f"{remote.data_root}/nothing-here")
    assert "is empty or missing" in missing


def test_remove_dir_stays_under_data_root(remote: SshdHost, host: SshHost) -> None:
    root = remote.data_root
    for outside in ("/", "/tmp", root, f"{root}/../x", f"{root}x/y", "relative/path", ""):
        with pytest.raises(UserError, match="refusing to remove"):
            remove_dir(host, outside)
    # A symlink inside data_root that leads out of it: refused on the host itself.
    victim = remote.workdir / "outside" / "victim"
    victim.mkdir(parents=True)
    uid, gid = (int(host.run(["id", flag]).stdout) for flag in ("-u", "-g"))
    os.chown(victim, uid, gid)
    os.chown(victim.parent, uid, gid)
    host.run(["ln", "-s", str(victim.parent), f"{root}/escape"])
    with pytest.raises(UserError, match="outside"):
        remove_dir(host, f"{root}/escape/victim")
    assert victim.is_dir()
    remove_dir(host, f"{root}/escape")  # the link itself is under data_root
    assert victim.is_dir() and not os.path.lexists(f"{root}/escape")


def test_a_reaped_too_late_postmaster_s_lock_is_cleared(tmp_path: Path) -> None:
    """A killed postmaster left a zombie (its parent, the host's init, had not reaped it):
    the wait before a start gives up on it and removes its lock file, which would make
    a new postmaster refuse to start; a lock naming a live process is left alone. The
    script is the one a host runs, run here with sh on this kernel."""
    from syncrep_lab.hosts import postmaster

    lock = tmp_path / "postmaster.pid"

    def clear() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", "-c", postmaster._ZOMBIE_LOCK_SH, "sh", str(tmp_path), "5"],
                              capture_output=True, text=True, timeout=30)

    child = os.fork()
    if child == 0:
        os._exit(0)
    try:
        time.sleep(0.2)  # exited, not waited for: a zombie
        lock.write_text(f"{child}\n{tmp_path}\n")
        assert clear().stdout.strip() == "removed" and not lock.exists()
    finally:
        os.waitpid(child, 0)
    lock.write_text(f"{os.getpid()}\n{tmp_path}\n")  # a live process
    assert clear().stdout.strip() == "" and lock.exists()


def test_the_snapshot_scripts_read_proc_as_procs_does(tmp_path: Path) -> None:
    """The /proc readers sent to a host take their fields from procs.py's table, and
    run here, both variants give the figures the local reader gives for the same
    process: one that used CPU itself and in a reaped child, then sleeps."""
    import re

    from syncrep_lab import procs
    from syncrep_lab.hosts import snapshots
    from syncrep_lab.probes.tracker import io_bytes, read_sample

    names = snapshots.SNAPSHOT_FIELDS
    positions = [getattr(procs, name) for name in names]
    assert re.findall(r"s\[(\d+)\]", snapshots._SNAPSHOT_PY) == [str(p) for p in positions]
    assert re.findall(r'"\$\{(\d+)\}"', snapshots._SNAPSHOT_SH) == [str(p + 1)
                                                                    for p in positions]
    spin = "i=0; while [ $i -lt 300000 ]; do i=$((i + 1)); done"
    # it writes 2 MiB in a child too (a reaped child's bytes are the parent's, as its CPU)
    busy = subprocess.Popen(["sh", "-c", f"{spin}; ( {spin} ); head -c 2097152 /dev/zero "
                                         "> written.bin; exec sleep 60"], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        # Until the sleep is in its one long nanosleep: "sleep" shows at exec, before the
        # loader's last switches, and a switch between two reads makes them differ.
        def asleep() -> bool:
            fields = procs.stat_fields(busy.pid)
            return (Path(f"/proc/{busy.pid}/comm").read_text().strip() == "sleep"
                    and fields is not None and fields[procs.STATE] == "S")

        while not asleep():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.2)
        fields = procs.stat_fields(busy.pid)
        sample = read_sample(busy.pid)
        assert fields is not None and sample is not None
        assert sample.utime > 0 and sample.cutime > 0  # a field read from the wrong place shows
        status = dict(line.split(":\t", 1) for line in
                      Path(f"/proc/{busy.pid}/status").read_text().splitlines())
        for prefer_python in (True, False):
            command = snapshots.snapshot_command(str(tmp_path), prefer_python=prefer_python)
            out = subprocess.run(["sh", "-c", *command[:1], "sh", *command[1:]],
                                 capture_output=True, text=True, check=True, timeout=60).stdout
            rows = snapshots.parse_snapshot(out)
            assert [row["pid"] for row in rows] == [busy.pid], out
            row = rows[0]
            assert row["ppid"] == int(fields[procs.PPID]) == os.getpid()
            assert (row["utime"], row["stime"], row["cutime"], row["cstime"]) == (
                sample.utime, sample.stime, sample.cutime, sample.cstime)
            assert (row["voluntary"], row["involuntary"]) == (sample.voluntary,
                                                              sample.involuntary)
            assert row["cpus_allowed_list"] == status["Cpus_allowed_list"].strip()
            assert row["title"] == "sleep 60"
            assert row["clk_tck"] == os.sysconf("SC_CLK_TCK")
            assert (row["read_bytes"], row["write_bytes"]) == io_bytes(busy.pid)
            assert row["write_bytes"] >= 2 << 20, row
    finally:
        busy.kill()
        busy.wait()
