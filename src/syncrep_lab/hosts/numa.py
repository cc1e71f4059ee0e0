"""Pages per NUMA node of a node's processes on an SSH host, summed from their
numa_maps there."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from syncrep_lab.hosts.ssh import SshHost

# Pages of each pid per NUMA node, summed over its numa_maps (as probes/tracker.numa_pages
# reads them here): one line a pid and node, pid, N<k>, pages.
_NUMA_PAGES_SH = r"""
for pid; do
  awk -v pid="$pid" '{ for (i = 3; i <= NF; i++) if ($i ~ /^N[0-9]+=[0-9]+$/) {
                         split($i, kv, "="); pages[kv[1]] += kv[2] } }
                     END { for (k in pages) printf "%s\t%s\t%s\n", pid, k, pages[k] }' \
      "/proc/$pid/numa_maps" 2>/dev/null
done
exit 0
"""


def numa_pages(host: SshHost, pids: Sequence[int]) -> dict[int, Counter[str]]:
    """Pages of each of ``pids`` per NUMA node (``N0``, ``N1`` ...), read on the host;
    a process gone, or whose numa_maps cannot be read, has none."""
    found: dict[int, Counter[str]] = {}
    if not pids:
        return found
    out = host.sh(_NUMA_PAGES_SH, *(str(int(p)) for p in pids),
                  what="reading numa_maps", timeout=120).stdout
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) == 3 and fields[0].isdigit() and fields[2].isdigit():
            found.setdefault(int(fields[0]), Counter())[fields[1]] += int(fields[2])
    return found
