"""This machine's disks and the networks the nodes use, read before and after each
repeat (readers/io_counters.py): the bytes, I/Os and busy share of every disk, and the
bytes and packets of every interface, beside the CPU the repeat already measures. The
SSH hosts' are read by run/host_watch.py, just after their clocks (hosts/machine.py)."""

from __future__ import annotations

import time

from syncrep_lab.cluster import server
from syncrep_lab.probes.recorder import Ending
from syncrep_lab.readers.io_counters import DiskCounters, NetCounters, disks_here, network_of
from syncrep_lab.run.target import Target
from syncrep_lab.store import DiskIoRow, NetIoRow, ProbeRows

HERE = ""  # the host column of this machine's rows

Networks = dict[tuple[int, str], dict[str, NetCounters]]  # (instance, node) -> interfaces


def disk_rows(host: str, before: dict[str, DiskCounters], after: dict[str, DiskCounters],
              seconds: float) -> list[DiskIoRow]:
    return [DiskIoRow(host, device, d.reads, d.writes, d.read_bytes, d.write_bytes,
                      d.busy_ms, seconds)
            for device, now in sorted(after.items()) if device in before
            for d in [now.since(before[device])]]


def net_rows(host: str, before: Networks, after: Networks, seconds: float) -> list[NetIoRow]:
    return [NetIoRow(host, instance, node, name, d.rx_bytes, d.tx_bytes, d.rx_packets,
                     d.tx_packets, seconds)
            for (instance, node), interfaces in sorted(after.items())
            for name, now in sorted(interfaces.items())
            if name in before.get((instance, node), {})
            for d in [now.since(before[(instance, node)][name])]]


class IoWatch:
    """A recorder of the repeat (probes/recorder.py): this machine's disks, and the
    network of each local node's namespace where the nodes have their own (node "" is
    this machine's own namespace, which every node without one shares)."""

    def __init__(self, targets: list[Target]) -> None:
        self.targets = targets
        self.before: tuple[dict[str, DiskCounters], Networks] = ({}, {})
        self.since = time.monotonic()

    def _read(self) -> tuple[dict[str, DiskCounters], Networks]:
        nets: Networks = {}
        shared = False
        for target in self.targets:
            manifest = target.manifest
            if manifest is None:
                shared = True  # an attached cluster: its traffic crosses this namespace
                continue
            layout = manifest.placed()
            read: set[str] = set()
            for node in manifest.local_nodes:
                launch = layout.nodes.get(node.name) if layout is not None else None
                if launch is None or launch.netns is None:
                    shared = True
                    continue
                if launch.netns in read:  # a standby beside the primary: its namespace's
                    continue
                read.add(launch.netns)
                pid = server.postmaster_pid(node.data_dir(manifest.dir))
                if pid is not None:
                    nets[(target.instance, node.name)] = network_of(pid)
        if shared:
            nets[(0, "")] = network_of(None)
        return disks_here(), nets

    def start(self) -> None:
        self.before = self._read()
        self.since = time.monotonic()

    def stop(self, ending: Ending) -> ProbeRows:
        disks, nets = self._read()
        seconds = time.monotonic() - self.since
        return ProbeRows(disk_io=disk_rows(HERE, self.before[0], disks, seconds),
                         net_io=net_rows(HERE, self.before[1], nets, seconds))

    def abort(self) -> None:
        pass
