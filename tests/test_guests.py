"""The guests' parts that need no boot: the initramfs archive as busybox's cpio reads it,
the modules' load order from the modules' ``depends=``, the QEMU command line, the
folders `clean` removes. Booting is bench/guest_boot.py's (about 4 s a guest here, TCG)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from syncrep_lab.errors import UserError
from syncrep_lab.guests import accel, initramfs, leftovers
from syncrep_lab.guests.accel import Accel
from syncrep_lab.guests.kernel import Kernel
from syncrep_lab.guests.qemu import Guest, GuestConfig
from syncrep_lab.network.owners import claim, unclaim


def _module(path: Path, depends: str) -> None:
    """A stand-in .ko: what the loader reads of it here is its .modinfo strings."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF\0\0\0license=GPL\0depends=" + depends.encode()
                     + b"\0vermagic=6.1.0 SMP\0")


def test_modules_in_load_order_with_their_dependencies(tmp_path: Path) -> None:
    mods = tmp_path / "lib" / "modules" / "6.1.0"
    _module(mods / "kernel/drivers/virtio/virtio.ko", "")
    _module(mods / "kernel/drivers/virtio/virtio_ring.ko", "")
    _module(mods / "kernel/drivers/virtio/virtio_pci.ko", "virtio_pci_modern_dev,virtio,"
            "virtio_ring")
    _module(mods / "kernel/drivers/virtio/virtio_pci_modern_dev.ko", "")
    _module(mods / "kernel/drivers/net/virtio_net.ko", "net_failover,virtio,virtio_ring")
    _module(mods / "kernel/drivers/net/net_failover.ko", "failover")
    _module(mods / "kernel/net/core/failover.ko", "")
    _module(mods / "kernel/fs/fuse/virtiofs.ko", "fuse,virtio,virtio_ring")
    _module(mods / "kernel/fs/fuse/fuse.ko", "")
    _module(mods / "kernel/fs/unrelated.ko", "")
    entries, order = initramfs.module_entries(mods, ["virtio_pci", "virtio_net", "virtiofs",
                                                     "overlay"])
    assert "unrelated" not in order and "overlay" not in order  # overlay: built in
    for module, needs in [("virtio_pci", "virtio_ring"), ("virtio_net", "net_failover"),
                          ("net_failover", "failover"), ("virtiofs", "fuse")]:
        assert order.index(needs) < order.index(module)
    assert sorted(order) == sorted(set(order))
    assert [e.name for e in entries] == [f"lib/modules/{m}.ko" for m in order]


def test_circular_dependencies_are_refused() -> None:
    with pytest.raises(UserError, match="circle"):
        initramfs.load_order(["a"], {"a": ["b"], "b": ["a"]})


@pytest.mark.skipif(not initramfs.BUSYBOX.is_file(), reason="no busybox-static")
def test_archive_unpacks_with_cpio(tmp_path: Path) -> None:
    files = {"env": (b"SRL_USER=postgres\n", 0o644), "host_key": (b"secret\n", 0o600)}
    archive = initramfs.build(None, files)
    out = tmp_path / "out"
    out.mkdir()
    proc = subprocess.run([str(initramfs.BUSYBOX), "cpio", "-i", "-d"], input=archive,
                          cwd=out, capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (out / "srl" / "env").read_bytes() == b"SRL_USER=postgres\n"
    assert stat.S_IMODE((out / "srl" / "host_key").stat().st_mode) == 0o600
    assert (out / "init").read_text().startswith("#!/bin/busybox sh")
    assert (out / "init").stat().st_mode & 0o111
    assert (out / "bin" / "busybox").read_bytes() == initramfs.BUSYBOX.read_bytes()
    assert stat.S_ISCHR((out / "dev" / "console").lstat().st_mode)
    assert (out / "srl" / "modules").read_text() == ""


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
def test_the_init_scripts_parse() -> None:
    for script in (initramfs.INIT, initramfs.STAGE2):
        proc = subprocess.run(["sh", "-n"], input=script, text=True, capture_output=True,
                              check=False)
        assert proc.returncode == 0, proc.stderr


def test_qemu_command_line(tmp_path: Path) -> None:
    vmlinuz = tmp_path / "vmlinuz"
    vmlinuz.write_bytes(b"")
    kernel = Kernel("6.1.0-test", vmlinuz, None)
    guest = Guest(GuestConfig(kernel=kernel, vcpus=2, memory_mb=512), index=7,
                  workdir=tmp_path, accel=Accel("tcg", "test"))
    argv = guest.qemu_argv("qemu-system-x86_64")
    joined = " ".join(argv)
    assert "-accel tcg,thread=multi -cpu max" in joined
    assert "-smp 2 -m 512M" in joined
    assert "memory-backend-memfd,id=mem,size=512M,share=on" in joined  # vhost-user needs it
    assert "tap,id=n0,ifname=tap7,script=no,downscript=no" in joined
    assert "srl.root=virtiofs" in joined
    assert guest.address == "10.215.7.2" and guest.namespace == "srl-guest7"
    # two virtual NUMA nodes: the memory halved between them, a vCPU each
    two = Guest(GuestConfig(kernel=kernel, vcpus=2, memory_mb=513, numa_nodes=2), index=7,
                workdir=tmp_path, accel=Accel("tcg", "test"))
    joined = " ".join(two.qemu_argv("qemu-system-x86_64"))
    assert "-smp 2 -m 512M" in joined and "id=mem," not in joined, joined
    assert ("memory-backend-memfd,id=mem0,size=256M,share=on -numa node,nodeid=0,"
            "memdev=mem0,cpus=0 -object memory-backend-memfd,id=mem1,size=256M,share=on "
            "-numa node,nodeid=1,memdev=mem1,cpus=1") in joined, joined
    image_guest = Guest(GuestConfig(kernel=kernel, root="image", image=tmp_path / "none"),
                        index=7, workdir=tmp_path, accel=Accel("kvm", "test", "host"))
    with pytest.raises(UserError, match="does not exist"):
        image_guest.qemu_argv("qemu-system-x86_64")
    (tmp_path / "none").write_bytes(b"")
    argv = image_guest.qemu_argv("qemu-system-x86_64")
    assert "-accel kvm -cpu host" in " ".join(argv)
    assert f"file={tmp_path / 'none'},format=raw,if=virtio,snapshot=on" in argv


def test_clean_finds_the_folders_of_dead_guests_only(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and ip")
    monkeypatch.setenv("SYNCREP_LAB_HOME", str(tmp_path))
    dead = leftovers.guests_dir() / "srl-guest-dead"
    live_name = f"srl-guest-live{os.getpid()}"
    live = leftovers.guests_dir() / live_name
    dead.mkdir(parents=True)
    live.mkdir()
    assert claim(live_name)
    try:
        subprocess.run(["ip", "netns", "add", live_name], check=True, timeout=30)
        assert leftovers.leftover_dirs(remove=False) == [dead]
        assert dead.exists()
        assert leftovers.leftover_dirs() == [dead]
        assert not dead.exists() and live.exists()
    finally:
        subprocess.run(["ip", "netns", "del", live_name], check=False, timeout=30)
        unclaim(live_name)
    assert leftovers.leftover_dirs() == [live]  # its namespace gone: a leftover now


@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="no QEMU")
def test_the_accelerator_is_probed_once_and_then_read_from_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SYNCREP_LAB_BUILDS", str(tmp_path))  # where the answer is kept
    kernel = Kernel("6.1.0-test", tmp_path / "vmlinuz", None)
    probes: list[str] = []

    def probe(k: Kernel, binary: str) -> Accel:
        probes.append(k.release)
        return Accel("tcg", "no KVM in this test")

    monkeypatch.setattr(accel, "probe", probe)
    first = accel.choose(kernel)
    again = accel.choose(kernel)
    assert probes == ["6.1.0-test"]
    assert (first.name, again.name) == ("tcg", "tcg")
    assert again.reason == "no KVM in this test (cached)"
    accel.choose(Kernel("6.12-test", tmp_path / "vmlinuz", None))  # another kernel: probed
    assert probes == ["6.1.0-test", "6.12-test"]


def test_a_host_s_numa_counters_per_node_over_a_repeat() -> None:
    """Each node's numastat grown over the repeat, for a host of several nodes; a host of
    one gives none (every allocation is a hit on its one node)."""
    from syncrep_lab.hosts.machine import parse_node_numastat
    from syncrep_lab.run.host_watch import numa_rows

    line = ("numa_hit {} numa_miss 0 numa_foreign 0 interleave_hit {} local_node {} "
            "other_node 0")
    before = parse_node_numastat("\n".join(
        [f"0 {line.format(100, 5, 90)}", f"1 {line.format(50, 5, 50)}"]))
    after = parse_node_numastat("\n".join(
        [f"0 {line.format(160, 35, 150)}", f"1 {line.format(80, 35, 50)}", "junk"]))
    rows = numa_rows("guest1", before, after, 2.0)
    assert [(r.numa_node, r.numa_hit, r.interleave_hit, r.local_node) for r in rows] == [
        (0, 60, 30, 60), (1, 30, 30, 0)]
    assert all(r.host == "guest1" and r.seconds == 2.0 for r in rows)
    assert numa_rows("far", {0: {"numa_hit": 1}}, {0: {"numa_hit": 9}}, 1.0) == []
