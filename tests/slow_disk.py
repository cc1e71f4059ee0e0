"""A standby's disk made slow the ways real volumes get slow, for the tests (and
bench/slow_standby.py) to check verdicts against faults the tool did not make itself.

The cluster's folder is put on a file system of its own: ext4 on a loop device whose
backing file is in /dev/shm (fast, and on no shared disk, so the only slowness is the
one asked for). A standby's processes are then moved into a blkio cgroup (v1) of the
test's own that throttles their writes to that device:

- ``iops``: a volume out of its IOPS (a cloud disk's provisioned or burst limit): each
  write and each flush is an I/O, so a WAL flush (data, then ext4's journal) waits for
  its turn; measured here: 200 8 kB O_DSYNC writes 0.08 s unthrottled, 1.9 s at 100
  IOPS;
- ``bps``: a volume out of throughput (burst credits spent down to its baseline): 100
  such writes took 4.0 s at 200 kB/s.

Both hold the standby's I/O above the device, as a provider's volume does from the
guest's side: the device itself is not busy. A third way, the least like a disk, is the
tool's own preload that sleeps before each fdatasync (``[nodes.b] flush_delay_us``).

Everything made is removed however the block ends: the processes leave the cgroup
(they are the cluster's, stopped by the caller before the unmount), the cgroup, the
mount, the loop device and its file; what a killed test left is swept by the next
volume made (:func:`sweep`, by the maker's pid in each name).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.cluster.teardown import remove_cluster

BLKIO = Path("/sys/fs/cgroup/blkio")
PREFIX = "srl-disk-"  # /dev/shm/srl-disk-PID-...: a volume and the pid of its maker
GROUP_PREFIX = "srl-test-slowdisk-"  # blkio/srl-test-slowdisk-PID-POSTMASTER
IMAGE_MB = 768
WORKLOAD = "insert into slow_rows(v) values (1);\n"  # the load the slow standby is met under


@dataclass
class Volume:
    """A file system on a loop device: where it is mounted and its device's numbers."""

    mount: Path
    device: str  # /dev/loopN
    numbers: str  # "7:N", as blkio takes it


@contextlib.contextmanager
def volume() -> Iterator[Volume]:
    """An ext4 file system on a loop device of its own, mounted on a fresh folder (0755),
    removed with everything on it when the block ends."""
    sweep()
    made = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir="/dev/shm"))
    image, mount = made / "image", made / "mnt"
    device = None
    try:
        with image.open("wb") as f:
            f.truncate(IMAGE_MB << 20)
        device = subprocess.run(["losetup", "--find", "--show", str(image)], check=True,
                                capture_output=True, text=True).stdout.strip()
        subprocess.run(["mkfs.ext4", "-q", "-F", device], check=True, capture_output=True)
        mount.mkdir()
        subprocess.run(["mount", device, str(mount)], check=True, capture_output=True)
        mount.chmod(0o755)
        made.chmod(0o755)
        st = os.stat(device)
        yield Volume(mount, device, f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
    finally:
        if mount.is_mount():
            subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)
        if device is not None:
            subprocess.run(["losetup", "-d", device], check=False, capture_output=True)
        shutil.rmtree(made, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep() -> None:
    """What a test killed before its teardown left (a kill -9 of its worker): the
    volumes and groups of processes that are gone, each named after its maker's pid."""
    for made in Path("/dev/shm").glob(f"{PREFIX}*"):
        maker = made.name.removeprefix(PREFIX).split("-")[0]
        if not maker.isdigit() or _alive(int(maker)):
            continue
        subprocess.run(["umount", "-l", str(made / "mnt")], check=False, capture_output=True)
        listed = subprocess.run(["losetup", "-j", str(made / "image")], check=False,
                                capture_output=True, text=True).stdout
        for line in listed.splitlines():
            subprocess.run(["losetup", "-d", line.split(":")[0]], check=False,
                           capture_output=True)
        shutil.rmtree(made, ignore_errors=True)
    for group in BLKIO.glob(f"{GROUP_PREFIX}*"):
        maker = group.name.removeprefix(GROUP_PREFIX).split("-")[0]
        if maker.isdigit() and not _alive(int(maker)):
            with contextlib.suppress(OSError):
                for line in (group / "cgroup.procs").read_text().split():
                    (BLKIO / "cgroup.procs").write_text(line)
                group.rmdir()


def tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        found.append(here)
        todo += children.get(here, [])
    return found


@contextlib.contextmanager
def throttled(postmaster: int, vol: Volume, *, iops: int | None = None,
              bps: int | None = None) -> Iterator[Path]:
    """The postmaster ``postmaster`` and its processes (and those it forks later) held
    to ``iops`` writes a second, or ``bps`` bytes a second, on ``vol``'s device; back
    in the root group, the group removed, when the block ends."""
    group = BLKIO / f"{GROUP_PREFIX}{os.getpid()}-{postmaster}"
    group.mkdir()
    try:
        if iops is not None:
            (group / "blkio.throttle.write_iops_device").write_text(f"{vol.numbers} {iops}")
        if bps is not None:
            (group / "blkio.throttle.write_bps_device").write_text(f"{vol.numbers} {bps}")
        for pid in tree(postmaster):
            with contextlib.suppress(OSError):  # a process that ended meanwhile
                (group / "cgroup.procs").write_text(str(pid))
        yield group
    finally:
        for line in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (BLKIO / "cgroup.procs").write_text(line)
        for name in ("blkio.throttle.write_iops_device", "blkio.throttle.write_bps_device"):
            with contextlib.suppress(OSError):
                (group / name).write_text(f"{vol.numbers} 0")
        group.rmdir()


@contextlib.contextmanager
def cluster(where: Path, flush_delay_us: int = 0) -> Iterator[Manifest]:
    """The seed's topology (primary, b and c, '1(b,c)') on PostgreSQL 18 in ``where``,
    with the table WORKLOAD writes; b's flushes ``flush_delay_us`` late (the preload);
    removed when the block ends."""
    manifest = up(UpOptions(dir=where, pg="18", standbys=2,
                            flush_delay_us={"b": flush_delay_us} if flush_delay_us else {}))
    try:
        with psycopg.connect(manifest.conninfo(manifest.primary), autocommit=True) as conn:
            conn.execute("create table slow_rows(id bigserial, v int)")
        yield manifest
    finally:
        remove_cluster(manifest.dir)


def postmaster_of(manifest: Manifest, name: str) -> int:
    """The postmaster of node ``name``."""
    node = next(n for n in manifest.nodes if n.name == name)
    return int((node.data_dir(manifest.dir) / "postmaster.pid").read_text().split()[0])
