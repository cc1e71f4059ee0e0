"""The guests of a run (topology.guests): checked before anything is made, booted before
the first cluster, driven as SSH hosts, and stopped on every way out.

A booted guest becomes a ``[hosts.guestN]`` of the spec the run goes on with: its address
on its own network namespace, the key and known_hosts made for it, the server account,
and the host's own PostgreSQL (the guest sees this machine's root read-only), so the
clusters, probes and host watch drive it as any SSH host. Its nodes' files live in its
memory (a tmpfs), so they go with it: a cluster's teardown has nothing to remove there
once the guest is stopped (cluster/remote_node.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

from syncrep_lab.errors import UserError
from syncrep_lab.guests import accel as accel_mod
from syncrep_lab.guests import initramfs, kernel
from syncrep_lab.guests.qemu import VIRTIOFSD, Guest, GuestConfig
from syncrep_lab.plan.spec import Host, Spec

FIX_SETUP = "apt-get install qemu-system-x86 busybox-static (./run setup installs them)"


# What a guest mounts of its own over the share of this machine's root
# (guests/initramfs.STAGE2): a PostgreSQL installed under one of them is not seen there.
OWN_MOUNTS = ("/proc", "/sys", "/dev", "/run", "/var/tmp")


def _visible_installations(spec: Spec) -> None:
    """Refused unless every PostgreSQL the cells run is where a guest sees it: it runs
    this machine's own installations through its read-only share of the root."""
    from syncrep_lab.pg.installations import for_server
    from syncrep_lab.runas import server_account

    for pg in dict.fromkeys([spec.topology.pg, *(spec.matrix.pg or [])]):
        where = str(for_server(pg, server_account()).bin_dir.resolve())
        hidden = next((m for m in OWN_MOUNTS if where == m or where.startswith(m + "/")),
                      None)
        if hidden is not None:
            raise UserError(
                f"PostgreSQL {pg or 'default'} is in {where}, which a guest does not see: "
                f"it shares this machine's root but mounts its own {hidden}",
                "set SYNCREP_LAB_HOME to a folder outside "
                f"{', '.join(OWN_MOUNTS)} and fetch or build it there again")


def check(spec: Spec) -> dict[str, Any]:
    """What the spec's guests need, refused with the fix where this machine lacks it;
    what is known before a boot otherwise (``run --check`` prints it)."""
    guests = spec.topology.guests
    if guests is None:
        return {}
    if os.geteuid() != 0:
        raise UserError("guests need root here: each gets a network namespace and a tap "
                        "device", "run syncrep-lab as root, or place the nodes on SSH hosts")
    needs = [(accel_mod.qemu_binary(), shutil.which(accel_mod.qemu_binary()) is not None,
              FIX_SETUP),
             ("busybox-static", initramfs.BUSYBOX.is_file(), FIX_SETUP),
             ("virtiofsd", any(os.access(p, os.X_OK) for p in VIRTIOFSD), FIX_SETUP),
             ("ip", shutil.which("ip") is not None, "apt-get install iproute2"),
             ("ssh-keygen", shutil.which("ssh-keygen") is not None,
              "apt-get install openssh-client"),
             # the guest's root is this machine's: its sshd is this machine's binary,
             # started by the guest's init (guests/initramfs.STAGE2), never here
             (f"an OpenSSH server ({initramfs.SSHD})", initramfs.SSHD.is_file(),
              "apt-get install openssh-server (./run setup installs it and leaves this "
              "machine's own ssh service as it was)")]
    for what, there, fix in needs:
        if not there:
            raise UserError(f"guests need {what}, which this machine lacks", fix)
    _visible_installations(spec)
    if guests.vcpu_cpus is not None:
        from syncrep_lab.placement.cpus import format_cpus, machine_cpus, parse_cpus

        usable = machine_cpus()
        outside = sorted(set(parse_cpus(guests.vcpu_cpus)) - set(usable))
        if outside:
            raise UserError(f"topology.guests.vcpu_cpus: CPU {format_cpus(outside)} is not "
                            f"one this process may use here ({format_cpus(usable)})",
                            f"choose among CPUs {format_cpus(usable)}")
    notes, first = [], None
    kernels = spec.guest_kernels()
    for name in kernels:
        have = kernel.cached(name)
        first = first or have
        note = _kernel_note(name, have)
        if len(kernels) > 1:
            note += f" for {', '.join(spec.guest_names(name))}"
        notes.append(note)
    known = accel_mod.known(first) if first is not None else None
    return {"guests": spec.guest_names(), "vcpus": guests.vcpus,
            "vcpu_cpus": guests.vcpu_cpus,
            "memory_mb": guests.memory_mb, "numa_nodes": guests.numa_nodes,
            "kernel": "; ".join(notes),
            "accel": (f"{known.name.upper()}: {known.reason}" if known is not None else
                      "probed at the first boot (KVM where a stock kernel boots under "
                      "it, else TCG; cached after)")}


def _kernel_note(name: str, have: kernel.Kernel | None) -> str:
    """What ``run --check`` says of a guest kernel: given, cached, or to be fetched;
    refused when a bzImage is not there."""
    if name.startswith("/"):
        if have is None:
            raise UserError(f"the guest kernel {name} does not exist",
                            "give the bzImage a kernel build made (arch/x86/boot/bzImage)")
        return f"{name} (given)"
    if have is not None:
        return f"{have.release} (cached)"
    package = kernel.concrete_package(kernel.package_for(name))
    return f"{package} (fetched with apt-get download at the first boot)"


@contextlib.contextmanager
def booted(spec: Spec, say: Callable[[str], None]) -> Iterator[tuple[Spec, list[Guest]]]:
    """The spec with a ``[hosts.guestN]`` for every guest booted, and the guests; every
    guest stopped when the block ends, however it ends (a SIGTERM raised inside
    included). A spec without guests is given back as it is."""
    guests = spec.topology.guests
    if guests is None:
        yield spec, []
        return
    from syncrep_lab.pg.installations import for_server
    from syncrep_lab.runas import server_account

    # matrix.kernel: a set of guests per kernel, all booted at once, so that the cells
    # of one round run in their kernels without a boot between them; modules go with
    # topology.guests.kernel's bzImage alone
    chosen = {name: kernel.for_guests(name, guests.modules if name == guests.kernel
                                      else None)
              for name in spec.guest_kernels()}
    bin_dir = str(for_server(spec.topology.pg, server_account()).bin_dir)
    user = server_account().name
    # the guest lets the account use sudo (guests/initramfs.STAGE2) where this machine's
    # root, which the guest runs from, has it: perf and bpftrace then run there as root
    sudo = shutil.which("sudo") is not None
    started: list[Guest] = []
    hosts = dict(spec.hosts)
    try:
        for name, of in [(n, k) for k in chosen for n in spec.guest_names(k)]:
            guest = Guest(GuestConfig(kernel=chosen[of], vcpus=guests.vcpus,
                                      memory_mb=guests.memory_mb, user=user,
                                      boot_timeout=guests.boot_timeout,
                                      numa_nodes=guests.numa_nodes), name=name)
            started.append(guest)
            nodes = (f", {guests.numa_nodes} virtual NUMA nodes" if guests.numa_nodes > 1
                     else "")
            say(f"booting {name} ({guests.vcpus} vCPU, {guests.memory_mb} MB{nodes}, kernel "
                f"{chosen[of].release})")
            guest.start()
            assert guest.accel is not None
            if guests.vcpu_cpus is not None:
                _pin(guest, guests.vcpu_cpus, name, say)
            why = f" ({guest.accel.reason})" if guest is started[0] else ""
            say(f"{name} ready in {guest.times.ssh_ready or 0:.1f} s under "
                f"{guest.accel.name.upper()}{why}, at {guest.address}")
            at = guest.host_spec(name)
            hosts[name] = Host(address=at.address, port=at.port, user=user, key=at.key,
                               known_hosts=at.known_hosts, bin_dir=bin_dir,
                               data_root=at.data_root, connect_timeout=at.connect_timeout,
                               sudo=sudo, guest=guest.namespace)
        yield spec.model_copy(update={"hosts": hosts}), started
    finally:
        for guest in reversed(started):
            guest.stop()


def _pin(guest: Guest, cpus: str, name: str, say: Callable[[str], None]) -> None:
    """The guest's vCPU threads confined to ``cpus`` here (topology.guests.vcpu_cpus),
    what they read back kept with the guest (its facts' ``vcpu_pinning``)."""
    from syncrep_lab.guests.costs import pin_vcpus, qemu_pid
    from syncrep_lab.placement.cpus import parse_cpus

    pid = qemu_pid(guest.namespace)
    pinned = pin_vcpus(pid, parse_cpus(cpus)) if pid is not None else {}
    if not pinned:
        raise UserError(f"{name}: no vCPU thread of its QEMU to pin to CPUs {cpus}",
                        "see the guest's console; or leave topology.guests.vcpu_cpus out")
    guest.vcpu_pinning = pinned
    say(f"{name}: vCPUs on CPUs " + ", ".join(f"{t} {c}" for t, c in pinned.items()))


def facts(guests: list[Guest]) -> dict[str, dict[str, Any]]:
    """What each guest was, for the run's ``machine``: how it ran (KVM or TCG, and why),
    its kernel, its size and how long it took to boot."""
    out = {}
    for guest in guests:
        cfg, accel = guest.config, guest.accel
        out[guest.name or guest.namespace] = {
            "accel": accel.name if accel else None, "accel_reason": accel.reason if accel
            else None, "kernel": cfg.kernel.release, "vcpus": cfg.vcpus,
            "memory_mb": cfg.memory_mb, "numa_nodes": cfg.numa_nodes,
            "vcpu_pinning": guest.vcpu_pinning,
            "namespace": guest.namespace,
            "address": guest.address, "root": cfg.root,
            "boot_s": {"root_mounted": guest.times.root_mounted,
                       "sshd_started": guest.times.sshd_started,
                       "ssh_ready": guest.times.ssh_ready}}
    return out

