"""Removing what syncrep-lab made on an SSH host: a directory below the host's
data_root, and nothing outside it."""

from __future__ import annotations

import posixpath

from syncrep_lab.errors import UserError
from syncrep_lab.hosts.ssh import SshHost


def remove_dir(host: SshHost, path: str) -> None:
    """Delete ``path`` on the host, only if it lies below the host's data_root.

    The check is made twice: on the text of the path here, and on the host
    after resolving symlinks of its parent, so neither ``..`` nor a link out
    of data_root can turn this into a deletion elsewhere. A path already
    gone is fine.
    """
    root = posixpath.normpath(host.spec.data_root)
    target = posixpath.normpath(path) if path else ""
    if (not posixpath.isabs(target) or target == root
            or not target.startswith(root.rstrip("/") + "/") or root == "/"):
        raise UserError(
            f"refusing to remove {path!r} on {host.spec.name}: it is not below the "
            f"host's data_root {host.spec.data_root}",
            "only directories syncrep-lab made under data_root are removed")
    script = (
        'root=$(cd -P -- "$1" 2>/dev/null && pwd -P) || exit 0\n'
        'target=$2\n'
        '[ -e "$target" ] || [ -L "$target" ] || exit 0\n'
        'parent=$(cd -P -- "$(dirname -- "$target")" && pwd -P) || exit 4\n'
        'case "$parent/" in\n'
        '  "$root"/*) ;;\n'
        '  *) echo "$target resolves to $parent, outside $root" >&2; exit 5;;\n'
        'esac\n'
        'rm -rf -- "$parent/$(basename -- "$target")"\n'
    )
    result = host.sh(script, root, target, what=f"removing {target}", timeout=300,
                     check=False)
    if result.returncode == 5:
        raise UserError(f"refusing to remove {path} on {host.spec.name}: "
                        f"{result.stderr.strip()}",
                        "a symlink leads out of data_root; remove it by hand after checking")
    if result.returncode != 0:
        raise UserError(f"could not remove {path} on {host.spec.name}: "
                        f"{result.stderr.strip()[-1500:] or 'exit ' + str(result.returncode)}",
                        f"check that {host.spec.user} owns everything under it")
