"""PostgreSQL's source as ``pg build`` takes it: a version, fetched as a Debian source
package; a release tarball; or a source tree (a developer's checkout).

A version is fetched through apt lists of the tool's own (under the cache dir), never
by editing the machine's apt sources: the archive URIs are read from the machine's own
sources, the suites are Debian's (unstable, then testing, then the machine's release),
and apt checks the download against the archive's signed index as it would for any
package. Only the upstream tarball inside the source package is used: Debian's own
patches are packaging, not PostgreSQL.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from syncrep_lab import paths
from syncrep_lab.errors import UserError

# Newest first: the first suite that has a version wins. 9.6 is in none of them.
SUITES = ("sid", "trixie", "bookworm")
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
LISTS_MAX_AGE_S = 24 * 3600
TARBALL_SUFFIXES = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz")
_UPSTREAM_RE = re.compile(r"^(?:\d+:)?([0-9.]+)")


@dataclass(frozen=True)
class Source:
    """Where a build's code comes from, and how it is named in the cache."""

    kind: str  # debian | tarball | tree
    path: Path  # the tarball, or the tree
    ident: str  # stable across calls: the package version, the tarball's hash, the tree
    describe: str  # for people: "Debian postgresql-18 18.6-3", "tarball x.tar.bz2 (sha ...)"


def archive_uris(sources_dir: Path = Path("/etc/apt")) -> list[str]:
    """The URIs of Debian's main archive among the machine's apt sources (one-line and
    deb822 forms), security suites left out: their pools are not the main archive's."""
    uris: list[str] = []

    def keep(uri: str, suites: list[str]) -> None:
        if uri.rstrip("/").endswith("/debian") and not all(
                s.endswith("-security") for s in suites) and uri not in uris:
            uris.append(uri)

    one_line = [sources_dir / "sources.list", *sorted(sources_dir.glob("sources.list.d/*.list"))]
    for path in one_line:
        for line in filter(None, _lines(path)):
            words = re.sub(r"\[[^]]*\]", "", line).split()
            if len(words) >= 3 and words[0] in ("deb", "deb-src"):
                keep(words[1], [words[2]])
    for path in sorted(sources_dir.glob("sources.list.d/*.sources")):
        for stanza in re.split(r"\n\s*\n", "\n".join(_lines(path))):
            fields = dict(line.split(":", 1) for line in stanza.splitlines() if ":" in line)
            for uri in fields.get("URIs", "").split():
                keep(uri, fields.get("Suites", "").split())
    return uris


def _lines(path: Path) -> list[str]:
    try:
        text = path.read_text()
    except OSError:
        return []
    return [raw.split("#", 1)[0].rstrip() for raw in text.splitlines()]


class AptLists:
    """apt's source indexes in a folder of the tool's own."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _options(self) -> list[str]:
        return ["-o", f"Dir::Etc::SourceList={self.root / 'sources.list'}",
                "-o", "Dir::Etc::SourceParts=/nonexistent",
                "-o", f"Dir::State::Lists={self.root / 'lists'}",
                "-o", f"Dir::Cache={self.root / 'cache'}",
                # apt drops to its own user to download; the folders are the tool's
                "-o", "APT::Sandbox::User=root", "-q"]

    def run(self, *args: str, cwd: Path | None = None, timeout: float = 600
            ) -> subprocess.CompletedProcess[str]:
        program = "apt-cache" if args[0] in ("showsrc", "policy") else "apt-get"
        try:
            return subprocess.run([program, *self._options(), *args], capture_output=True,
                                  text=True, timeout=timeout, check=False, cwd=cwd,
                                  stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise UserError(f"{program} is not installed, so no Debian source package can "
                            "be fetched", "give a source tree or a tarball instead") from None
        except subprocess.TimeoutExpired:
            raise UserError(f"{program} {args[0]} did not finish in {timeout:.0f} s",
                            "check the network to the Debian archive, or give a tarball "
                            "or a source tree") from None

    def update(self) -> None:
        """Fresh lists (at most a day old): the archive's Sources indexes of SUITES."""
        stamp = self.root / "lists" / ".updated"
        if stamp.exists() and time.time() - stamp.stat().st_mtime < LISTS_MAX_AGE_S:
            return
        uris = archive_uris()
        if not uris:
            raise UserError("this machine's apt sources name no Debian archive to fetch "
                            "PostgreSQL's source from",
                            "give a source tree or a tarball (syncrep-lab pg build DIR|FILE)")
        signed = f"[signed-by={KEYRING}] " if KEYRING.exists() else ""
        (self.root / "lists" / "partial").mkdir(parents=True, exist_ok=True)
        (self.root / "cache" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
        (self.root / "sources.list").write_text("".join(
            f"deb-src {signed}{uri} {suite} main\n" for uri in uris for suite in SUITES))
        res = self.run("update")
        if res.returncode != 0:
            raise UserError(f"apt-get update of the tool's source lists failed: "
                            f"{_last(res.stderr)}",
                            "check the network to the Debian archive, or give a tarball or "
                            "a source tree")
        stamp.touch()

    def versions(self, package: str) -> list[str]:
        """The versions of a source package in the lists, as apt-cache shows them."""
        res = self.run("showsrc", package)
        return [ln.split(":", 1)[1].strip() for ln in res.stdout.splitlines()
                if ln.startswith("Version:")]


def _last(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "(no message)"


def upstream(debian_version: str) -> str:
    """18.6-3 -> 18.6; 1:9.6.24-1 -> 9.6.24.

    >>> upstream('15.18-0+deb12u1')
    '15.18'
    """
    match = _UPSTREAM_RE.match(debian_version)
    return match.group(1) if match else debian_version


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in upstream(version).split(".") if p.isdigit())


def debian_source(version: str) -> Source:
    """The upstream tarball of the Debian source package of PostgreSQL ``version`` (a
    major, 18, or a release, 18.6), downloaded once into the cache."""
    if not re.fullmatch(r"\d+(\.\d+){0,2}", version):
        raise UserError(f"{version!r} is not a PostgreSQL version, a tarball or a source tree",
                        "give a version (18, 15.18), a .tar.bz2/.tar.gz file, or a directory "
                        "holding PostgreSQL's source (its configure script)")
    # before 10 a major was two numbers (9.6), since then one (18)
    major = ".".join(version.split(".")[:2 if version.startswith("9.") else 1])
    package = f"postgresql-{major}"
    lists = AptLists(paths.builds_dir() / "apt")
    lists.update()
    found = lists.versions(package)
    wanted = [v for v in found
              if upstream(v) == version or upstream(v).startswith(version + ".")]
    if not wanted:
        have = ", ".join(sorted(set(found), key=_version_key)) or "none"
        raise UserError(f"no Debian source package of PostgreSQL {version} in the suites "
                        f"{', '.join(SUITES)} (versions of {package} there: {have})",
                        ("give one of those versions, " if found else "give ")
                        + "a tarball from postgresql.org's archive, or a source tree")
    chosen = max(wanted, key=_version_key)
    into = paths.builds_dir() / "sources" / f"{package}_{chosen}"
    tarball = _orig_tarball(into)
    if tarball is None:
        tmp = into.with_name(f".{into.name}.{time.monotonic_ns()}")
        tmp.mkdir(parents=True)
        try:
            res = lists.run("source", "--download-only", f"{package}={chosen}", cwd=tmp)
            if res.returncode != 0 or _orig_tarball(tmp) is None:
                raise UserError(f"downloading the source of {package} {chosen} failed: "
                                f"{_last(res.stderr)}",
                                "check the network to the Debian archive, or give a tarball")
            shutil.rmtree(into, ignore_errors=True)
            tmp.rename(into)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        tarball = _orig_tarball(into)
        assert tarball is not None
    return Source("debian", tarball, f"debian-{package}-{chosen}",
                  f"Debian {package} {chosen}")


def _orig_tarball(folder: Path) -> Path | None:
    found = sorted(folder.glob("*.orig.tar.*")) if folder.is_dir() else []
    return found[0] if found else None


def resolve_source(text: str) -> Source:
    """What ``pg build SOURCE`` names: a tree, a tarball, or a version."""
    path = Path(text).expanduser()
    if path.is_dir():
        if not (path / "configure").is_file() or not (path / "src" / "backend").is_dir():
            raise UserError(f"{path} is not a PostgreSQL source tree (no configure script and "
                            "src/backend in it)",
                            "give the top of a PostgreSQL checkout or unpacked tarball")
        tree = path.resolve()
        return Source("tree", tree, "tree-" + hashlib.sha256(str(tree).encode()).hexdigest()[:12],
                      f"source tree {tree}")
    if path.is_file():
        if not path.name.endswith(TARBALL_SUFFIXES):
            raise UserError(f"{path} is not a tarball (.tar.gz, .tar.bz2, .tar.xz)",
                            "give a PostgreSQL release tarball, a source tree or a version")
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        return Source("tarball", path.resolve(), f"tarball-{digest[:16]}",
                      f"tarball {path.name} (sha256 {digest[:12]})")
    if "/" in text or text.endswith(TARBALL_SUFFIXES):
        raise UserError(f"{text}: no such file or directory",
                        "give an existing tarball or source tree, or a version (18, 15.18)")
    return debian_source(text)
