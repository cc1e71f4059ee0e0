"""The guest's first userspace: an initramfs written here, one per boot.

Debian's cloud kernel builds virtio (PCI, net, block), fuse, virtiofs and overlay as
modules, so a root can only be mounted after they are loaded; the initramfs holds them
(in their load order, from each module's ``depends=``), a static busybox, the per-guest
files (keys, sshd's configuration, the second-stage script) and an ``/init`` that mounts
the root and hands over to that script. It is a plain ``newc`` cpio, written in Python
(no cpio, no depmod: the host need not have kmod), a few MB, made in a few ms.
"""

from __future__ import annotations

import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from syncrep_lab.errors import UserError

# What a guest mounts and talks through; their dependencies are found by modinfo.
GUEST_MODULES = ("virtio_pci", "virtio_net", "virtio_blk", "virtiofs", "overlay")

BUSYBOX = Path("/bin/busybox")  # Debian's busybox-static: no libraries to carry along
SSHD = Path("/usr/sbin/sshd")  # STAGE2 starts it from the root: on "hostfs", this machine's


@dataclass(frozen=True)
class Entry:
    """One member of the archive: a directory (``data`` None, mode S_IFDIR), a regular
    file, or a character device (``rdev`` = (major, minor))."""

    name: str
    mode: int
    data: bytes = b""
    rdev: tuple[int, int] = (0, 0)


def newc(entries: Iterable[Entry]) -> bytes:
    """A ``newc`` cpio archive of ``entries``, as the kernel unpacks an initramfs.

    >>> archive = newc([Entry("init", 0o100755, b"#!/bin/sh\\n")])
    >>> archive[:6], archive[110:115], b"TRAILER!!!" in archive
    (b'070701', b'init\\x00', True)
    >>> len(archive) % 4
    0
    """
    out = bytearray()

    def put(ino: int, entry: Entry) -> None:
        name = entry.name.encode() + b"\0"
        fields = (ino, entry.mode, 0, 0, 1, 0, len(entry.data), 0, 0, *entry.rdev,
                  len(name), 0)
        out.extend(b"070701" + b"".join(b"%08X" % f for f in fields) + name)
        out.extend(b"\0" * (-len(out) % 4))
        out.extend(entry.data)
        out.extend(b"\0" * (-len(out) % 4))

    ino = 1
    for entry in entries:
        put(ino, entry)
        ino += 1
    put(0, Entry("TRAILER!!!", 0))
    return bytes(out)


def modinfo_field(ko: bytes, key: str) -> str | None:
    """A field of a kernel module's ``.modinfo`` section, read from the file's bytes.

    The section is NUL-separated ``key=value`` strings; looking for ``\\0key=`` in the
    whole file finds it without an ELF parser (no other section holds such a string).

    >>> modinfo_field(b"\\x7fELF..\\0license=GPL\\0depends=virtio,virtio_ring\\0", "depends")
    'virtio,virtio_ring'
    >>> modinfo_field(b"\\0depends=\\0", "depends")
    ''
    >>> modinfo_field(b"nothing", "depends") is None
    True
    """
    marker = b"\0" + key.encode() + b"="
    at = ko.find(marker)
    if at < 0:
        return None
    start = at + len(marker)
    return ko[start:ko.index(b"\0", start)].decode()


def module_files(modules_dir: Path) -> dict[str, Path]:
    """Every ``.ko`` below a kernel's ``lib/modules/RELEASE``, by module name (``-`` and
    ``_`` are the same in a module's name, as modprobe treats them)."""
    found = {p.name[:-3].replace("-", "_"): p for p in modules_dir.rglob("*.ko")}
    if not found:
        raise UserError(f"no kernel modules (*.ko) below {modules_dir}",
                        "give the modules the kernel was built with (make modules_install "
                        "INSTALL_MOD_PATH=DIR), or none if it has what a guest needs built in")
    return found


def load_order(wanted: Iterable[str], depends: dict[str, list[str]]) -> list[str]:
    """The modules to insmod, each after those it depends on; a name absent from
    ``depends`` is built into the kernel and left out.

    >>> load_order(["virtio_net", "overlay"], {"virtio_net": ["net_failover", "virtio"],
    ...     "net_failover": ["failover"], "failover": [], "virtio": [], "overlay": []})
    ['failover', 'net_failover', 'virtio', 'virtio_net', 'overlay']
    >>> load_order(["virtio_pci"], {})
    []
    """
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in order or name not in depends:
            return
        if name in path:
            raise UserError(f"kernel modules depend on each other in a circle: "
                            f"{' -> '.join((*path, name))}",
                            "check the kernel's modules")
        for dep in depends[name]:
            visit(dep, (*path, name))
        order.append(name)

    for name in wanted:
        visit(name.replace("-", "_"), ())
    return order


def module_entries(modules_dir: Path | None, wanted: Iterable[str] = GUEST_MODULES
                   ) -> tuple[list[Entry], list[str]]:
    """The archive members holding ``wanted`` and their dependencies, and the load order.
    ``modules_dir`` None: a kernel with everything built in."""
    if modules_dir is None:
        return [], []
    files = module_files(modules_dir)
    depends: dict[str, list[str]] = {}
    blobs: dict[str, bytes] = {}
    todo = [w.replace("-", "_") for w in wanted]
    while todo:
        name = todo.pop()
        if name in blobs or name not in files:
            continue
        blobs[name] = files[name].read_bytes()
        deps = [d.replace("-", "_") for d in (modinfo_field(blobs[name], "depends") or "")
                .split(",") if d]
        depends[name] = deps
        todo.extend(deps)
    order = load_order(wanted, depends)
    return [Entry(f"lib/modules/{n}.ko", 0o100644, blobs[n]) for n in order], order


# The first stage, run by busybox as pid 1: modules, the root, then the second stage.
# The root is chosen on the kernel's command line (srl.root=virtiofs|blk). Every failure
# prints a line starting "srl-guest: FAILED" on the console, which the launcher watches
# for, and powers off, so a guest that cannot boot is refused at once, not at a deadline.
INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t devtmpfs dev /dev
fail() { echo "srl-guest: FAILED: $*" >/dev/console; poweroff -f; sleep 5; }
for m in $(cat /srl/modules); do
    insmod "/lib/modules/$m.ko" || fail "insmod $m"
done
root=virtiofs
for arg in $(cat /proc/cmdline); do
    case "$arg" in srl.root=*) root=${arg#srl.root=} ;; esac
done
mkdir -p /newroot /lower /rw
case "$root" in
virtiofs)
    mount -t virtiofs -o ro hostroot /lower || fail "mount the host's root (virtiofs)"
    mount -t tmpfs -o mode=755 rw /rw || fail "mount the overlay's tmpfs"
    mkdir -p /rw/upper /rw/work
    mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot ||
        fail "mount the overlay"
    ;;
blk)
    mount -t ext4 /dev/vda /newroot || fail "mount the image (/dev/vda)"
    ;;
*) fail "unknown srl.root=$root" ;;
esac
mount -t tmpfs -o mode=755 run /newroot/run || fail "mount /run"
cp -a /srl /newroot/run/srl || fail "copy the guest's files"
mkdir -p /newroot/run/srl/bin && cp /bin/busybox /newroot/run/srl/bin/ || fail "copy busybox"
umount /proc
umount /dev
echo "srl-guest: root mounted ($root)" >/dev/console
exec switch_root /newroot /run/srl/bin/busybox sh /run/srl/stage2
"""

# The second stage, pid 1 on the root. Its commands are busybox's, from /run (a tmpfs),
# before the root's own: on the host's root every program the root holds is opened and
# linked through virtiofs, and under TCG the root's mount, ip, sed ... took 8 to 10 s
# from the root mounted to sshd started, against 2 s on the image. Only sshd (and
# useradd, for an image without the account) come from the root. It mounts what a
# system needs, brings the network up, starts sshd and then reaps orphans for good
# (ash's `wait` collects any child, so a detached postmaster that dies does not stay a
# zombie).
STAGE2 = r"""set -u
/run/srl/bin/busybox mount -t proc proc /proc  # --install reads /proc/self/exe
/run/srl/bin/busybox --install -s /run/srl/bin
export PATH=/run/srl/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
. /run/srl/env
fail() { echo "srl-guest: FAILED: $*" >/dev/console; echo o >/proc/sysrq-trigger; sleep 5; }
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
# /var/tmp of its own (the nodes' data_root: their files in the guest's memory, and none
# of this machine's seen there); /tmp stays the overlay's, so a checkout or a test folder
# under this machine's /tmp (an installation in its .venv) is seen there as here
mount -t tmpfs -o mode=1777 vartmp /var/tmp
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
hostname "$SRL_HOSTNAME"
echo "127.0.1.1 $SRL_HOSTNAME" >> /etc/hosts
# The host's accounts on its root; an image may lack the server account.
id "$SRL_USER" >/dev/null 2>&1 || useradd -M -s /bin/sh "$SRL_USER" || fail "add $SRL_USER"
# sshd without PAM refuses a locked account ("!" in shadow, as Debian makes postgres):
# unlocked in the guest's copy only (the overlay's), still without a password.
sed -i "s/^$SRL_USER:![^:]*:/$SRL_USER:*:/" /etc/shadow
# The account may run anything as root with `sudo -n` (perf, bpftrace: the probes of a
# host with sudo = true), in the guest's copy of sudoers.d only: the guest's root is a
# throwaway (this machine's files are read-only there, its writes stay in its memory)
if [ -d /etc/sudoers.d ]; then
    echo "$SRL_USER ALL=(root) NOPASSWD:SETENV: ALL" > /etc/sudoers.d/zz-srl-guest
    chmod 0440 /etc/sudoers.d/zz-srl-guest
fi
# an account made for servers alone may have no shell (nologin): sshd runs commands in it
sed -i "s#^\($SRL_USER:[^:]*:[^:]*:[^:]*:[^:]*:[^:]*:\).*#\1/bin/sh#" /etc/passwd
ip link set lo up
ip addr add "$SRL_ADDRESS" dev eth0 || fail "address eth0"
ip link set eth0 up
mkdir -p /run/sshd && chmod 755 /run/sshd
/usr/sbin/sshd -f /run/srl/sshd_config -E /run/srl/sshd.log || fail "start sshd"
echo "srl-guest: ready" >/dev/console
while :; do
    sleep 3600 &
    wait
done
"""


def guest_entries(files: dict[str, tuple[bytes, int]]) -> list[Entry]:
    """The per-guest members under /srl: ``files`` maps a name to (content, mode)."""
    return [Entry(f"srl/{name}", stat.S_IFREG | mode, data)
            for name, (data, mode) in sorted(files.items())]


def build(modules_dir: Path | None, files: dict[str, tuple[bytes, int]],
          busybox: Path = BUSYBOX) -> bytes:
    """The whole initramfs: busybox, the modules, /init and the guest's files."""
    if not busybox.is_file():
        raise UserError(f"{busybox} is missing: a guest's initramfs needs a static busybox",
                        "apt-get install busybox-static (./run setup installs it)")
    modules, order = module_entries(modules_dir)
    dirs = ["bin", "dev", "proc", "sys", "lib", "lib/modules", "srl", "newroot", "lower", "rw"]
    entries = [Entry(d, stat.S_IFDIR | 0o755) for d in dirs]
    entries.append(Entry("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1)))
    entries.append(Entry("bin/busybox", 0o100755, busybox.read_bytes()))
    entries.append(Entry("init", 0o100755, INIT.encode()))
    entries += modules
    entries.append(Entry("srl/modules", 0o100644, "".join(f"{m}\n" for m in order).encode()))
    entries.append(Entry("srl/stage2", 0o100755, STAGE2.encode()))
    entries += guest_entries(files)
    return newc(entries)
