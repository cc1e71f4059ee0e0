"""The two sides of ``ab``: what the bases and ``--patch`` values name, and both builds
of every base made (or found) through ``pg build`` (pg/builds.py: cached by source,
patches, flavor and configure flags; a patch that does not apply or does not compile is
refused with its hunk or compiler error and leaves nothing cached).

A base is what ``pg build`` takes (a version, a tarball, a source tree). Stock is the
base as it is, patched the base with its patches; with ``--base COMMIT`` on a git tree,
stock is that commit (exported once with ``git archive`` into the builds cache, then
built like a tarball) and patched the tree as it is now. A patch that changes no file
(``git diff`` of nothing is empty) leaves the source byte for byte what stock is: the
patched side is then stock's installation copied under a name of its own, so no build
is made for it (an A/A).
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from syncrep_lab import paths
from syncrep_lab.errors import UserError
from syncrep_lab.pg.builds import Build, build, changes_files, copy_build
from syncrep_lab.pg.source import resolve_source

PATCH_FIX = "give the path of a patch file (git diff or diff -u output)"
FORM_FIX = "write it as --patch FILE, or --patch VERSION=FILE for one base, e.g. --patch 15=f.patch"


@dataclass(frozen=True)
class PatchFile:
    path: Path  # absolute
    sha256: str
    changes: bool  # whether it changes any file

    @property
    def name(self) -> str:
        return self.path.name

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "path": str(self.path), "sha256": self.sha256,
                "changes_files": self.changes}


@dataclass(frozen=True)
class Request:
    """What the command line asked for, read and checked; nothing built yet."""

    bases: list[str]
    patches: dict[str, list[PatchFile]]  # base -> its patches, in order
    git_base: str | None  # --base COMMIT: stock is this commit of the one base's tree


@dataclass(frozen=True)
class Sides:
    """One base's two builds."""

    base: str  # as given
    stock: Build
    patched: Build
    patches: list[PatchFile]
    stock_from: str  # for people: "Debian postgresql-18 18.6-3", "commit 3f2a9c1b0d4e of ..."
    note: str | None = None  # e.g. the patched side is a copy of stock (an A/A)


def _read_patch(text: str, given: str) -> PatchFile:
    path = Path(text).expanduser()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"--patch {given}: no such file", PATCH_FIX) from None
    except IsADirectoryError:
        raise UserError(f"--patch {given}: a directory, not a patch file", PATCH_FIX) from None
    except OSError as exc:
        raise UserError(f"--patch {given}: {exc.strerror}", PATCH_FIX) from None
    return PatchFile(path.resolve(), hashlib.sha256(raw).hexdigest(), changes_files(raw))


def _matches(prefix: str, base: str) -> bool:
    """``--patch 15=F`` names base 15, 15.18 (a release of that major) or the base as
    written."""
    return base == prefix or (base.replace(".", "").isdigit() and base.startswith(prefix + "."))


def parse_request(bases: list[str], patch_args: list[str], git_base: str | None) -> Request:
    """The bases and their patches; every file is read here, before anything is built."""
    if not bases:
        raise UserError("no base given", "give what stock is built from: a version (18), "
                        "a tarball or a source tree, e.g. syncrep-lab ab 18 --patch f.patch")
    if len(set(bases)) != len(bases):
        raise UserError(f"a base is given twice ({' '.join(bases)})", "give each base once")
    patches: dict[str, list[PatchFile]] = {b: [] for b in bases}
    for given in patch_args:
        if "=" in given and not Path(given).expanduser().exists():
            prefix, _, file = given.partition("=")
            if not prefix or not file:
                raise UserError(f"--patch {given!r}: a version and a file are needed on each "
                                "side of '='", FORM_FIX)
            named = [b for b in bases if _matches(prefix, b)]
            if not named:
                raise UserError(f"--patch {given}: {prefix} is not one of the bases "
                                f"({', '.join(bases)})",
                                f"add {prefix} as a base (syncrep-lab ab {' '.join(bases)} "
                                f"{prefix} ...), or give the patch without '{prefix}='")
            patch = _read_patch(file, given)
        else:
            named, patch = bases, _read_patch(given, given)
        for b in named:
            patches[b].append(patch)
    if git_base is not None:
        if len(bases) != 1:
            raise UserError("--base COMMIT takes one base: the git tree whose commit is "
                            f"stock (given: {' '.join(bases)})",
                            "give one source tree, e.g. syncrep-lab ab ~/src/postgresql "
                            "--base master")
        tree = Path(bases[0]).expanduser()
        if not (tree / ".git").exists():
            raise UserError(f"--base {git_base}: {bases[0]} is not a git tree",
                            "give the top of a git checkout of PostgreSQL as the base, or "
                            "leave --base out and give --patch FILE")
    else:
        bare = [b for b in bases if not patches[b]]
        if bare:
            raise UserError(f"no patch for {', '.join(bare)}: there is nothing to judge",
                            "give --patch FILE (--patch VERSION=FILE for one base), or for a "
                            "git tree --base COMMIT (stock: that commit, patched: the tree)")
    return Request(list(bases), patches, git_base)


def _git(tree: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        # safe.directory: a checkout owned by another user is read, never written
        return subprocess.run(["git", "-c", f"safe.directory={tree}", "-C", str(tree), *args],
                              capture_output=True, check=False, timeout=600,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise UserError("--base needs git, which is not installed",
                        "apt-get install git, or give --patch FILE instead") from None


def export_commit(tree: Path, commit: str, progress: Callable[[str], None]) -> tuple[Path, str]:
    """The commit's files as a tarball in the builds cache (made once per commit), and
    the commit's full hash."""
    tree = tree.resolve()
    found = _git(tree, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    if found.returncode != 0:
        raise UserError(f"--base {commit}: not a commit of {tree}",
                        f"give a branch, tag or hash that git -C {tree} rev-parse knows")
    sha = found.stdout.decode().strip()
    into = paths.builds_dir() / "git" / f"postgresql-{sha[:12]}.tar.gz"
    if not into.exists():
        progress(f"exporting commit {sha[:12]} of {tree}")
        into.parent.mkdir(parents=True, exist_ok=True)
        tmp = into.with_name(f".{into.name}.tmp")
        done = _git(tree, "archive", "--format=tar.gz", f"--prefix=postgresql-{sha[:12]}/",
                    "-o", str(tmp), sha)
        if done.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise UserError(f"git archive of {sha[:12]} failed: "
                            f"{done.stderr.decode(errors='replace').strip()[:300]}",
                            "check the tree with git -C TREE status")
        tmp.replace(into)
    return into, sha


def _tree_name(source_text: str, flavor: str) -> str | None:
    """An unpatched tree's build name: its own (pg build's default, pgVERSION-FLAVOR,
    is shared by every source of that version)."""
    if not Path(source_text).expanduser().is_dir():
        return None
    source = resolve_source(source_text)
    if source.kind != "tree":
        return None
    return f"tree-{source.ident.removeprefix('tree-')[:8]}-{flavor}"


def build_sides(request: Request, flavor: str, jobs: int | None,
                progress: Callable[[str], None]) -> list[Sides]:
    """Both builds of every base, stock first."""
    out: list[Sides] = []
    for base in request.bases:
        patches = request.patches[base]
        changing = [p.path for p in patches if p.changes]
        note = None
        if request.git_base is not None:
            tarball, sha = export_commit(Path(base).expanduser(), request.git_base, progress)
            progress(f"stock: commit {sha[:12]}")
            stock = build(str(tarball), [], flavor, f"git-{sha[:12]}-{flavor}", jobs,
                          progress)
            stock_from = f"commit {sha[:12]} ({request.git_base}) of {Path(base).resolve()}"
            progress(f"patched: {base} as it is" + (" with its patches" if changing else ""))
            patched = build(base, changing, flavor,
                            None if changing else _tree_name(base, flavor), jobs, progress)
        else:
            progress(f"stock: {base}")
            stock = build(base, [], flavor, _tree_name(base, flavor), jobs, progress)
            stock_from = stock.source
            if changing:
                progress(f"patched: {base} with {', '.join(p.name for p in changing)}")
                patched = build(base, changing, flavor, None, jobs, progress)
            else:
                patched = copy_build(stock, f"{stock.name}-copy", progress)
                note = ("the patches change no file: the patched side is a copy of the "
                        "stock build (the same bytes, an A/A)")
        out.append(Sides(base, stock, patched, patches, stock_from, note))
    return out
