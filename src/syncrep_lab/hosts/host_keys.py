"""The SSH host keys a connection trusts: known_hosts read leniently, the server's key
seen when known_hosts does not trust it (so that the error can say "not known" or
"mismatch"), the algorithms offered, and a new key recorded where a host is set to
accept it. Its own module so that asyncssh, which takes a fifth of a second to import,
is imported only by the commands that connect to a host (hosts/ssh.py loads it lazily).
"""

from __future__ import annotations

import os
from pathlib import Path

import asyncssh
from asyncssh.public_key import get_default_certificate_algs, get_default_public_key_algs

from syncrep_lab.errors import UserError


def load_known_hosts(path: Path) -> asyncssh.SSHKnownHosts:
    """The known_hosts file, or an empty list when there is none.

    Lines asyncssh cannot parse (key types it does not support, say) are
    skipped rather than making every host unreachable; they cannot vouch for
    a host here either way.
    """
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise UserError(f"cannot read the known_hosts file {path}: {exc.strerror}",
                        "make it readable, or point known_hosts at another file") from None
    good = []
    for line in text.splitlines():
        try:
            asyncssh.import_known_hosts(line)
        except (ValueError, asyncssh.KeyImportError):
            continue
        good.append(line)
    return asyncssh.import_known_hosts("\n".join(good))


class HostKeyCheck(asyncssh.SSHClient):
    """Sees the server's key whenever known_hosts does not already trust it.

    asyncssh first checks the key against known_hosts itself (plain keys,
    revocations, certificate authorities) and asks this callback only about a
    key it does not trust. Recording what was presented, and whether the file
    holds *other* keys for the host, is what lets the error say "not known"
    or "mismatch" instead of a bare "not trusted".
    """

    def __init__(self, known: asyncssh.SSHKnownHosts, accept_new: bool) -> None:
        self.known = known
        self.accept_new = accept_new
        self.presented: asyncssh.SSHKey | None = None
        self.listed = False  # known_hosts holds some key or CA for this host
        self.accepted = False

    def validate_host_public_key(self, host: str, addr: str, port: int,
                                 key: asyncssh.SSHKey) -> bool:
        self.presented = key
        found = self.known.match(host, addr, port if port != 22 else None)
        self.listed = bool(found[0]) or bool(found[1])
        if self.accept_new and not self.listed:
            self.accepted = True
            return True
        return False


def host_key_algorithms(address: str, port: int, known: asyncssh.SSHKnownHosts) -> list[str]:
    """Every host key algorithm, those of the keys on record for the host first.

    Left to itself, asyncssh offers the server only the algorithms of the
    keys on record; a server that has none of those (its RSA key is on record
    but it now only has an ed25519 one) then just drops the connection, which
    would read as "unreachable". Offering the rest too lets that server show
    its key, so the error can say what it is: a key that does not match.
    Listing the recorded ones first keeps a host with several keys on the
    one the file knows, as OpenSSH does.
    """
    try:
        found = known.match(address, address, port if port != 22 else None)
    except ValueError:
        found = ([], [], [], [], [], [], [])
    preferred: list[bytes] = [alg for key in found[0] for alg in key.sig_algorithms]
    if found[1]:  # a certificate authority for the host: certificates first
        preferred = get_default_certificate_algs() + preferred
    every = preferred + get_default_certificate_algs() + get_default_public_key_algs()
    return [alg.decode() for alg in dict.fromkeys(every)]


def fingerprint(key: asyncssh.SSHKey) -> str:
    return f"{key.get_fingerprint('sha256')} ({key.get_algorithm()})"


def record_host_key(path: Path, pattern: str, name: str, key: asyncssh.SSHKey) -> None:
    """Append the key of host ``name`` to the known_hosts file ``path`` under its
    ``pattern`` (HostSpec.known_hosts_pattern), as ssh-keyscan output would be."""
    algorithm, blob = key.export_public_key("openssh").decode().split()[:2]
    line = f"{pattern} {algorithm} {blob}\n"
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as out:
            out.write(line)
    except OSError as exc:
        raise UserError(
            f"connected to {name} but could not record its host key in {path}: "
            f"{exc.strerror}",
            f"make {path} writable, or add the key yourself: {line.strip()}") from None
