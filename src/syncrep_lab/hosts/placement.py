"""What an SSH host's kernel applied to a node's processes (CPUs, memory nodes, NUMA
policy, cpuset cgroup), read there as placement/cgroups.placement_of reads a process
here."""

from __future__ import annotations

from collections.abc import Sequence

from syncrep_lab.hosts.ssh import SshHost

# What the kernel applied to each pid, as placement/cgroups.placement_of reads it here: one
# line a live process, pid, Cpus_allowed_list, Mems_allowed_list, the memory policy (the
# first non-default one among its own memory's mappings in numa_maps; "unknown" when
# numa_maps cannot be read) and its cpuset cgroup. A process whose numa_maps is empty is
# exiting (its memory already released) and is left out, as numa_policy_of does.
_PLACEMENT_SH = r"""
for pid; do
  s=/proc/$pid/status
  [ -r "$s" ] || continue
  cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "$s")
  mems=$(sed -n 's/^Mems_allowed_list:[[:space:]]*//p' "$s")
  if [ -r "/proc/$pid/numa_maps" ]; then
    policy=$(awk '$2 != "default" && (!/file=/ || /heap|stack|SYSV|memfd|zero/) {
                    print $2; found = 1; exit }
                  END { if (!found && NR == 0) print "gone" }' "/proc/$pid/numa_maps" \
             2>/dev/null)
    [ "$policy" = gone ] && continue
  else
    policy=unknown
  fi
  group=$(sed -n 's/^[0-9]*:[^:]*cpuset[^:]*://p; s/^0::\(.*\)/\1/p' "/proc/$pid/cgroup" |
          head -n 1)
  printf '%s\t%s\t%s\t%s\t%s\n' "$pid" "$cpus" "$mems" "${policy:-default}" "$group"
done
exit 0
"""


def placement_of(host: SshHost, pids: Sequence[int]) -> dict[int, dict[str, str]]:
    """What the host's kernel applied to each of ``pids`` still alive there: cpus, mems,
    numa_policy and cgroup, as placement_of reads a process here."""
    if not pids:
        return {}
    out = host.sh(_PLACEMENT_SH, *(str(int(p)) for p in pids),
                  what="reading the placement of processes", timeout=60).stdout
    found = {}
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) == 5 and fields[0].isdigit():
            found[int(fields[0])] = dict(zip(("cpus", "mems", "numa_policy", "cgroup"),
                                             fields[1:], strict=True))
    return found
