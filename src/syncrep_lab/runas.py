"""Running PostgreSQL programs as an unprivileged account.

``initdb`` and ``postgres`` refuse to run as root. When syncrep-lab itself runs
as root (as CI does), every server-side program runs as the ``postgres``
account if the machine has one, otherwise as a ``syncrep`` system account the
tool creates; the files it makes for servers are owned by that account.
Run as a normal user, everything simply runs as that user.
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from syncrep_lab.errors import UserError

SERVICE_ACCOUNTS = ("postgres", "syncrep")


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    home: str

    @property
    def is_self(self) -> bool:
        return self.uid == os.geteuid()


def _from_pwd(entry: pwd.struct_passwd) -> Account:
    return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


@cache
def server_account() -> Account:
    """The account servers run as: ourselves, or an unprivileged one when we are root."""
    if os.geteuid() != 0:
        return _from_pwd(pwd.getpwuid(os.geteuid()))
    for name in SERVICE_ACCOUNTS:
        try:
            return _from_pwd(pwd.getpwnam(name))
        except KeyError:
            continue
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    result = subprocess.run(
        [useradd, "--system", "--user-group", "--home-dir", "/nonexistent",
         "--shell", "/usr/sbin/nologin", "syncrep"],
        capture_output=True, text=True, check=False,
    )
    if result.returncode != 0:
        raise UserError(
            f"running as root, and no unprivileged account to run PostgreSQL as "
            f"(useradd syncrep failed: {result.stderr.strip()})",
            "create one (useradd --system syncrep) or run syncrep-lab as a normal user",
        )
    return _from_pwd(pwd.getpwnam("syncrep"))


def account_env(account: Account, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    if not account.is_self:
        env.update(HOME=account.home, USER=account.name, LOGNAME=account.name)
    env["LC_ALL"] = "C"
    if extra:
        env.update(extra)
    return env


def popen_kwargs(account: Account) -> dict[str, Any]:
    """Keyword arguments that make subprocess run a program as ``account``."""
    if account.is_self:
        return {}
    return {"user": account.uid, "group": account.gid, "extra_groups": []}


def as_account(account: Account, cwd: str | os.PathLike[str] = "/") -> dict[str, Any]:
    """subprocess arguments that run a program as ``account``, in ``cwd``."""
    return {"env": account_env(account), "cwd": os.fspath(cwd), **popen_kwargs(account)}


def run_as(
    account: Account,
    argv: Sequence[str | os.PathLike[str]],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = 120,
) -> subprocess.CompletedProcess[str]:
    """Run a program as ``account``; output captured, never raises on exit status."""
    return subprocess.run(
        [os.fspath(a) for a in argv],
        capture_output=True,
        text=True,
        env=account_env(account, env),
        cwd=cwd if cwd is not None else "/",
        timeout=timeout,
        check=False,
        **popen_kwargs(account),
    )


def make_dir_for(account: Account, path: Path, mode: int = 0o700) -> None:
    """Create ``path`` (and missing parents) owned by ``account``."""
    path.mkdir(parents=True, exist_ok=True, mode=mode)
    if not account.is_self:
        os.chown(path, account.uid, account.gid)
    path.chmod(mode)


def unreachable_ancestor(account: Account, path: Path) -> Path | None:
    """The first ancestor of ``path`` that ``account`` cannot traverse, if any.

    Used to refuse, with a clear reason, a cluster dir or a bin dir that the
    unprivileged server account could never reach (e.g. anything under /root).
    """
    if account.is_self:
        return None
    path = path.resolve()
    for parent in reversed([path, *path.parents]):
        if not parent.exists():
            break
        st = parent.stat()
        if st.st_uid == account.uid:
            ok = bool(st.st_mode & 0o100)
        elif st.st_gid == account.gid:
            ok = bool(st.st_mode & 0o010)
        else:
            ok = bool(st.st_mode & 0o001)
        if not ok:
            return parent
    return None


# glibc's name for where a program built with -pg writes its profile at exit
PROFILE_PREFIX = "GMON_OUT_PREFIX"


def divert_profiles() -> None:
    """Make every program of a profiling build that the tool starts, except the servers,
    write its profile into a folder of this process's instead of ``gmon.out`` in its
    working directory (pgbench's in the user's own folder, initdb's and
    ``postgres --version``'s ...). glibc honours ``GMON_OUT_PREFIX`` (the file is then
    PREFIX.PID), and the tool's children inherit it; the server start takes it out again,
    so a server's processes keep PostgreSQL's ``DATA/gprof/PID/gmon.out``, which the
    gprof probe reads. The folder is removed when the tool exits. Other programs ignore
    the variable."""
    if PROFILE_PREFIX in os.environ:
        return
    folder = Path(tempfile.mkdtemp(prefix="syncrep-lab-gmon-"))
    folder.chmod(0o1777)  # the server account's programs write there too
    os.environ[PROFILE_PREFIX] = str(folder / "gmon.out")
    atexit.register(shutil.rmtree, folder, True)
