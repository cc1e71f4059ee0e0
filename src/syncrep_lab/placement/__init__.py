"""Where processes run: CPUs and memory nodes.

Synchronous replication throughput depends on which CPUs the walwriter, the
walsenders and the backends share, and on which NUMA node their memory sits.
This package makes those choices explicit and checkable:

- ``cpus``: CPU and node lists ("0-3,5"), checked against this machine;
- ``cgroups``: cpuset cgroups (v1 and v2) that a postmaster is started inside,
  so that every process it forks later stays on the same CPUs, plus the
  read-back of what the kernel actually applied to a process;
- ``pinning``: a watcher that pins processes of one role (the walsender
  serving standby b, the walwriter, every new backend) to CPUs as they appear;
- ``numa``: numactl memory policies and their read-back from ``numa_maps``.

Everything that is set is read back from /proc or the cgroup files, because the
kernel silently narrows requests (a CPU outside a process's cpuset, a node that
has no memory) and a measurement must report what really happened.
"""
