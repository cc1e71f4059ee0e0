"""Where processes run: CPUs and memory nodes.

Synchronous replication throughput depends on which CPUs the walwriter, the
walsenders and the backends share, and on which NUMA node their memory sits.
This package holds all of placement, named by what each module does:

- the kernel's mechanics:
  - ``cpus``: CPU and node lists ("0-3,5"), checked against this machine;
  - ``cgroups``: cpuset cgroups (v1 and v2) that a postmaster is started inside
    (``JoinFn``, the one way a child joins a cpuset), so that every process it forks
    later stays on the same CPUs, plus the read-back of what the kernel applied;
  - ``pinning``: a watcher that pins processes of one role (the walsender serving
    standby b, the walwriter, every new backend) to CPUs as they appear;
  - ``quota``: CPU quotas per role (cgroup v1's cpu controller) and ``cpu.stat``'s
    throttled counts; the pinner moves each role's processes into their group;
  - ``numa``: numactl memory policies and their read-back from ``numa_maps``;
- ``layout``: one cluster's placement (cpusets, numactl, namespaces, pins) as saved in
  its manifest, applied before the first server starts and undone after the last.

This is a bottom layer: it knows processes, CPUs and namespaces, never a spec, a run or
the store. A spec's placement turned into each instance's layout is
``plan/placement.py``; during a run, pinning kept up and what the kernel gave each role
read back into the store is ``run/placement_watch.py``.

What the spec asks of this machine (its CPUs, writable cpusets, numactl) is checked
before anything is made, in ``run/preflight.py``.

Everything that is set is read back from /proc or the cgroup files, because the
kernel silently narrows requests (a CPU outside a process's cpuset, a node that
has no memory) and a measurement must report what really happened.
"""
