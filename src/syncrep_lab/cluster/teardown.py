"""``cluster down`` and ``clean``: stop what syncrep-lab started, remove what it made.

Only dirs holding the manifest are touched, only the entries the manifest
names are deleted, and a postmaster is signalled only when /proc confirms it
runs in one of those data dirs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syncrep_lab import shutdown
from syncrep_lab.cluster import server, shared_memory
from syncrep_lab.cluster.manifest import (
    MANIFEST,
    is_kept,
    live_owner,
    load,
    registered,
    unregister,
)
from syncrep_lab.errors import UserError
from syncrep_lab.placement import layout as placing


@dataclass
class DownReport:
    dir: Path
    stopped: list[str]
    killed: list[str]
    removed: bool
    seconds: float


def stop_nodes(cluster_dir: Path, names: list[str], mode: str, timeout: float) -> tuple[
    list[str], list[str]
]:
    pids: dict[Path, int] = {}
    for name in names:
        data = cluster_dir / name
        pid = server.signal_stop(data, mode)
        if pid is not None:
            pids[data] = pid
    killed = server.wait_gone(pids, timeout)
    return [d.name for d in pids], [d.name for d in killed]


def _remove_remote(nodes: list[Any]) -> list[str]:
    """Stop and remove the standbys on SSH hosts (first: they stream from the primary)."""
    problems = []
    for node in nodes:
        if node.host is None or node.remote_data is None or _in_a_gone_guest(node.host):
            continue
        from syncrep_lab.cluster import remote_node

        try:
            remote_node.stop_standby(remote_node.host_spec(node.host), node.remote_data)
        except UserError as exc:
            problems.append(f"{node.name} on {node.host.get('name')}: {exc.cause}")
    return problems


def _in_a_gone_guest(host: dict[str, Any]) -> bool:
    """Whether ``host`` is a guest a run booted whose QEMU is gone (its run was killed:
    QEMU dies with it): what its nodes had was in its memory and went with it, and
    there is nothing to reach."""
    namespace = host.get("guest")
    if not namespace:
        return False
    from syncrep_lab.guests.costs import qemu_pid

    return qemu_pid(str(namespace)) is None


def _remove_client(client: dict[str, Any] | None) -> list[str]:
    """End the client on an SSH host and remove its folder there."""
    if client is None or _in_a_gone_guest(client["host"]):
        return []
    from syncrep_lab.cluster import remote_node

    try:
        remote_node.remove_client(client)
    except UserError as exc:
        return [f"the client's folder on {client['host'].get('name')}: {exc.cause}"]
    return []


def kill_leftovers(data_dirs: list[Path], timeout: float = 5.0) -> list[str]:
    """SIGKILL server processes still running in ``data_dirs`` once their postmasters are
    gone: the children of a postmaster that was itself killed (a forced exit, the OOM
    killer), or a postmaster whose postmaster.pid is missing. Returns their data dirs'
    names."""
    pids = server.processes_in(data_dirs)
    if not pids:
        return []
    names = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            names.add(Path(os.readlink(f"/proc/{pid}/cwd")).name)
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while server.processes_in(data_dirs) and time.monotonic() < deadline:
        time.sleep(0.01)
    return sorted(names)


def remove_cluster(
    cluster_dir: Path, *, keep_dir: bool = False, keep_data: bool = False, timeout: float = 30
) -> DownReport:
    """Stop every node of the cluster in ``cluster_dir`` and (unless keep_data) remove it."""
    started = time.monotonic()
    manifest = load(cluster_dir)
    if manifest is None:
        raise UserError(
            f"{cluster_dir} holds no syncrep-lab cluster ({MANIFEST} is missing); "
            "nothing was stopped or removed",
            "give the --dir that was used with cluster up (see: syncrep-lab clean --list)",
        )
    names = [n.name for n in manifest.local_nodes]
    remote_problems = [] if keep_data else [*_remove_remote(manifest.nodes),
                                            *_remove_client(manifest.client)]
    if shutdown.requested() is not None:
        timeout = min(timeout, 5.0)  # interrupted: escalate sooner (a second signal: at once)
    # Standbys first: a primary stopping first makes them log reconnection errors.
    order = names[1:] + names[:1]
    stopped, killed = stop_nodes(cluster_dir, order, "fast" if keep_data else "immediate",
                                 timeout)
    if keep_data:
        manifest.state = "stopped"
        manifest.save()
        return DownReport(cluster_dir, stopped, killed, False, time.monotonic() - started)
    killed += kill_leftovers([cluster_dir / name for name in names])
    for name in names:  # what a postmaster killed (here or before) could not remove
        shared_memory.release(cluster_dir / name)
    (cluster_dir / "secret").unlink(missing_ok=True)
    layout = manifest.placed()
    if layout is not None:
        # the servers are gone: their namespaces, links and cpusets can go too
        problems = placing.undo(layout)
        if problems:
            raise UserError("could not remove what placed the cluster: " + "; ".join(problems),
                            "syncrep-lab clean tries again; ip netns list and "
                            "/sys/fs/cgroup/cpuset/syncrep-lab show what is left")
    for name in names:
        shutil.rmtree(cluster_dir / name, ignore_errors=True)
        (cluster_dir / f"{name}.log").unlink(missing_ok=True)
    shutil.rmtree(cluster_dir / "sock", ignore_errors=True)
    (cluster_dir / (MANIFEST + ".tmp")).unlink(missing_ok=True)
    if remote_problems:
        # Everything here is gone; the manifest stays, naming what is left on the hosts,
        # so that clean tries again once they answer.
        manifest.state = "stopped"
        manifest.save()
        raise UserError("could not remove what is on SSH hosts: " + "; ".join(remote_problems),
                        "bring the host back and run syncrep-lab clean (it tries again); if it "
                        f"is gone for good, delete {cluster_dir / MANIFEST}, all that is left "
                        "here, and what the cluster left below the host's data_root")
    (cluster_dir / MANIFEST).unlink(missing_ok=True)
    unregister(cluster_dir)
    if not keep_dir:
        with contextlib.suppress(OSError):  # something not ours is in it: leave it
            cluster_dir.rmdir()
    return DownReport(cluster_dir, stopped, killed, True, time.monotonic() - started)


def in_use() -> dict[Path, int]:
    """The registered clusters whose maker still runs (a run in another terminal): cluster
    folder -> that process's pid. ``clean`` leaves them alone."""
    found = {}
    for cluster_dir in registered():
        pid = live_owner(cluster_dir)
        if pid is not None:
            found[cluster_dir] = pid
    return found


def kept() -> list[Path]:
    """The registered clusters that ``cluster up`` finished (:func:`manifest.keep`): the
    user's to keep. ``clean`` leaves them alone unless asked to remove them too."""
    return [d for d in registered() if is_kept(d) and load(d) is not None]


@dataclass
class Cleaned:
    """What :func:`clean` did: the clusters it removed, the namespaces and groups no
    cluster recorded, and what it left alone (a live run's clusters, by their maker's
    pid; clusters ``cluster up`` made, kept)."""

    reports: list[DownReport]
    leftovers: list[str]
    busy: dict[Path, int]
    kept: list[Path]


def clean(with_kept: bool = False, *, machine: bool = True) -> Cleaned:
    """Remove every cluster this user's syncrep-lab created and did not take down, but
    those whose maker still runs (:func:`in_use`) and, unless ``with_kept``, those ``cluster
    up`` made (:func:`kept`); then, unless ``machine`` is False, the namespaces and cpuset
    groups of the tool that no cluster recorded (a run killed between making them and
    saving its manifest): those are the machine's, whichever tool home made them."""
    busy = in_use()
    spared: list[Path] = []
    reports = []
    for cluster_dir in registered():
        if load(cluster_dir) is None:
            unregister(cluster_dir)
        elif not with_kept and is_kept(cluster_dir):
            spared.append(cluster_dir)
        elif cluster_dir not in busy:
            reports.append(remove_cluster(cluster_dir))
    leftovers = placing.leftovers() if machine and os.geteuid() == 0 else []
    return Cleaned(reports, leftovers, busy, spared)
