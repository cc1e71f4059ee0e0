"""What a guest costs this machine, read here: its vCPU threads' CPU time and their wait
for a CPU (run delay), and the whole QEMU process's CPU.

QEMU names each vCPU thread ``CPU N/KVM`` (or ``CPU N/TCG`` under emulation);
``/proc/PID/task/TID/schedstat`` gives a thread's time on a CPU and its time runnable
but waiting, in ns. A vCPU that waits for a CPU here is time the guest loses without
seeing it, unless its kernel reads a steal clock (KVM's paravirtual one; TCG has none,
so a TCG guest's steal reads 0 however long its vCPUs wait). The guest's own steal is
read there, with its /proc/stat (hosts/machine.py); this module is the host's side.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

from syncrep_lab import procs
from syncrep_lab.errors import UserError


@dataclass(frozen=True)
class QemuReading:
    vcpus: int  # vCPU threads seen
    vcpu_cpu_ns: int  # their time on a CPU
    vcpu_delay_ns: int  # their time runnable, waiting for a CPU
    process_ticks: int  # the whole process's utime + stime (vCPUs, I/O threads)


def read(path: str) -> str | None:
    try:
        return procs.read(path)
    except OSError:  # the process or thread has gone
        return None


def qemu_pid(namespace: str) -> int | None:
    """The QEMU process in the guest's network namespace, or None (gone)."""
    proc = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True,
                          text=True, timeout=10, check=False, stdin=subprocess.DEVNULL)
    for word in proc.stdout.split():
        if word.isdigit() and (read(f"/proc/{word}/comm") or "").startswith("qemu-system"):
            return int(word)
    return None


def read_qemu(pid: int) -> QemuReading | None:
    """The QEMU process's counters, or None when it has gone."""
    fields = procs.stat_fields(pid)
    if fields is None:
        return None
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    vcpus = cpu_ns = delay_ns = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        comm = read(f"/proc/{pid}/task/{tid}/comm") or ""
        if not is_vcpu(comm):
            continue
        sched = (read(f"/proc/{pid}/task/{tid}/schedstat") or "").split()
        if len(sched) >= 2:
            vcpus += 1
            cpu_ns += int(sched[0])
            delay_ns += int(sched[1])
    return QemuReading(vcpus, cpu_ns, delay_ns, ticks)


def vcpu_threads(pid: int) -> dict[int, str]:
    """tid -> name of each vCPU thread of the QEMU process ``pid`` ({} when gone)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    named = {int(tid): (read(f"/proc/{pid}/task/{tid}/comm") or "").strip() for tid in tids}
    return {tid: name for tid, name in sorted(named.items()) if is_vcpu(name)}


def pin_vcpus(pid: int, cpus: list[int]) -> dict[str, str]:
    """Each vCPU thread of QEMU ``pid`` confined to ``cpus`` of this machine; what each
    one's affinity reads back afterwards (name -> Cpus_allowed_list)."""
    from syncrep_lab.placement.cpus import format_cpus

    out = {}
    for tid, name in vcpu_threads(pid).items():
        try:
            os.sched_setaffinity(tid, cpus)
            out[name] = format_cpus(sorted(os.sched_getaffinity(tid)))
        except ProcessLookupError:  # the thread has gone: the guest with it
            continue
        except OSError as exc:
            raise UserError(f"cannot pin {name} of QEMU (pid {pid}) to CPUs "
                            f"{format_cpus(cpus)}: {exc.strerror}",
                            "choose CPUs this process may use (its cpuset's), or leave "
                            "topology.guests.vcpu_cpus out") from None
    return out


def is_vcpu(comm: str) -> bool:
    """Whether a QEMU thread's name is a vCPU's.

    >>> is_vcpu("CPU 0/KVM\\n"), is_vcpu("CPU 12/TCG"), is_vcpu("qemu-system-x86")
    (True, True, False)
    """
    name = comm.strip()
    return name.startswith("CPU ") and name.endswith(("/KVM", "/TCG"))
