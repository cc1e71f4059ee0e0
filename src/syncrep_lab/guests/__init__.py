"""Guests: PostgreSQL hosts that are virtual machines the tool starts itself.

- :mod:`.kernel`: the guest's kernel (Debian's cloud kernel from its package, or a user's).
- :mod:`.initramfs`: the first userspace, written per boot (modules, root, sshd).
- :mod:`.accel`: KVM where a stock kernel boots under it here, else TCG; probed once.
- :mod:`.image`: the alternative root, an ext4 image built once from Debian packages.
- :mod:`.qemu`: a guest's lifecycle (namespace, virtiofsd, QEMU, ready over SSH).
- :mod:`.leftovers`: a killed run's guest folders, for `clean`.

Not yet wired into the spec or runs; see "Guests" in docs/decisions.md.
"""
