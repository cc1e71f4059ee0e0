"""PostgreSQL built from source: ``syncrep-lab pg build SOURCE [--patch FILE]...
[--flavor F] [--name NAME]``.

The cache (``paths.paths.builds_dir()``) holds two kinds of thing:

- ``trees/SOURCE-FLAVOR``: one build tree per source and flavor, configured once and
  kept. A build with other patches reverts the last ones (from the copies of the files
  they touched, kept before they were applied) and applies the new ones, so ``make``
  recompiles only the files the patches change.
- ``installs/NAME``: one installation per source, patches, flavor and configure flags,
  with ``build.json`` saying what it was built from. It is written to a temporary folder
  and renamed into place only once ``make install`` succeeded, so an interrupted or
  failed build leaves no installation behind; a patch that does not apply leaves the
  tree as it was before it.

Installations are relocatable: the programs find their libraries through an rpath of
``$ORIGIN/../lib`` and PostgreSQL finds its share folder relative to its bin folder, so
an installation can be moved into place after ``make install``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from syncrep_lab import paths
from syncrep_lab.errors import UserError
from syncrep_lab.pg.source import Source, resolve_source


@dataclass(frozen=True)
class Flavor:
    configure: tuple[str, ...]
    cflags: str
    unfit: str | None = None  # why its figures are not performance figures


# -O2 is PostgreSQL's own default: CFLAGS given to configure replace it, so each flavor
# says it again (an unoptimised build would skew every figure).
FLAVORS = {
    "release": Flavor((), "-O2"),
    "frame-pointers": Flavor((), "-O2 -fno-omit-frame-pointer"),
    # gprof maps the PC samples and call arcs of gmon.out to symbols at the executable's
    # link addresses: a position-independent postgres (Debian's gcc default) is loaded
    # elsewhere, and its profile came out with time and calls under the wrong functions
    # (shared-memory set-up code hot in a walsender). A fixed address keeps them right.
    "profiling": Flavor(("--enable-profiling", "LDFLAGS_EX=-no-pie"), "-O2",
                        "a profiling build (-pg: every call of every function counted): "
                        "read it for calls per commit, not for its TPS or CPU"),
    "debug": Flavor(("--enable-debug", "--enable-cassert"), "-O0 -g",
                    "a debug build (assertions on, not optimised): for correctness runs, "
                    "its figures say nothing about performance"),
}
# What a benchmark needs and nothing more: no ICU, no readline (psql's line editing).
BASE_CONFIGURE = ("--without-icu", "--without-readline")
PREFIX = "/usr/local/pgsql"  # configure's; the installation is moved from there
_NAME_RE = re.compile(r"[a-z][a-z0-9._-]{0,47}")
# Debian packages that provide what a build runs, by the program or file looked for
BUILD_DEPS = {"cc": "gcc", "make": "make", "perl": "perl", "patch": "patch",
              "/usr/include/zlib.h": "zlib1g-dev"}
PARSER_DEPS = {"bison": "bison", "flex": "flex"}  # when the source has no generated parser


@dataclass
class Build:
    name: str
    key: str
    source: str
    flavor: str
    patches: list[dict[str, str]] = field(default_factory=list)  # name and sha256 of each
    configure: list[str] = field(default_factory=list)
    version: str = ""
    seconds: float = 0.0
    created_at: str = ""
    copy_of: str | None = None  # the build whose installation this is a copy of

    @property
    def bin_dir(self) -> Path:
        return paths.builds_dir() / "installs" / self.name / "bin"

    @property
    def installed(self) -> bool:
        """Its installation is there (a cache can lose it: removed by hand, half-copied)."""
        return self.bin_dir.joinpath("postgres").exists()

    @property
    def unfit(self) -> str | None:
        return FLAVORS[self.flavor].unfit if self.flavor in FLAVORS else None

    def describe(self) -> dict[str, object]:
        """What ``pg build --json`` and ``pg list --json`` say of it."""
        return {**asdict(self), "bin_dir": str(self.bin_dir), "unfit": self.unfit}


def list_builds() -> list[Build]:
    """Every finished build in the cache, by name."""
    out = []
    for meta in sorted((paths.builds_dir() / "installs").glob("*/build.json")):
        with contextlib.suppress(OSError, ValueError, TypeError):
            out.append(Build(**json.loads(meta.read_text())))
    return out


def find_build(name: str) -> Build | None:
    return next((b for b in list_builds() if b.name == name), None)


def build_at(bin_dir: str | Path) -> Build | None:
    """The build whose installation ``bin_dir`` is, if it is one."""
    where = Path(bin_dir).resolve()
    return next((b for b in list_builds() if b.bin_dir.resolve() == where), None)


def unfit_note(bin_dir: str | Path) -> str | None:
    """Why figures measured on the installation in ``bin_dir`` are not performance
    figures (a debug build), or None."""
    built = build_at(bin_dir)
    return f"PostgreSQL build {built.name} is {built.unfit}" if built and built.unfit else None


def check_name(name: str) -> str:
    if not _NAME_RE.fullmatch(name) or name in ("embedded", "debian"):
        raise UserError(f"--name {name!r} is not a usable build name",
                        "start with a letter; then letters, digits, '.', '_' or '-' "
                        "(a name that begins with a letter never reads as a version)")
    return name


def _missing(deps: dict[str, str]) -> list[str]:
    return sorted({pkg for what, pkg in deps.items()
                   if not (Path(what).exists() if what.startswith("/") else shutil.which(what))})


def _require(deps: dict[str, str], why: str) -> None:
    missing = _missing(deps)
    if missing:
        raise UserError(f"building PostgreSQL {why} needs {', '.join(missing)}, "
                        f"which {'is' if len(missing) == 1 else 'are'} not installed",
                        f"apt-get install {' '.join(missing)} (./run setup installs them "
                        "when run as root)")


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One build at a time per cache: two would share a tree."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def tree_dir(source: Source, flavor: str, custom: str = "") -> Path:
    """Where ``source`` is unpacked and built in ``flavor``: one tree per source and
    flavor, to which a build's patches are applied and from which they are undone;
    ``custom`` (a hash of --cflags and --configure) a tree of its own, since make does
    not rebuild objects whose flags alone changed."""
    return paths.builds_dir() / "trees" / (f"{source.ident}-{flavor}"
                                           + (f"-{custom}" if custom else ""))


_CONFIGURE_ARG = re.compile(r"--[a-z][a-z0-9-]*(=.*)?|[A-Z_][A-Z0-9_]*=.*")


def custom_flags(cflags: str | None, configure: Sequence[str]) -> list[str]:
    """--configure arguments checked (``--enable-x``, ``--with-x=y`` or ``VAR=value``,
    e.g. the seed's ``PREFERRED_SEMAPHORES=NAMED_POSIX``), and --cflags: what is added to
    configure's command line; a UserError for what the build itself sets."""
    for arg in configure:
        if not _CONFIGURE_ARG.fullmatch(arg):
            raise UserError(f"--configure {arg!r} is not a configure argument",
                            "give --enable-X, --with-X[=Y] or VARIABLE=value, one a "
                            "--configure (e.g. --configure PREFERRED_SEMAPHORES=NAMED_POSIX)")
        if arg.split("=", 1)[0] in ("--prefix", "CFLAGS", "--exec-prefix"):
            raise UserError(f"--configure {arg!r}: the build sets that itself",
                            "give the C compiler's flags with --cflags; the prefix is the "
                            "cache's (the installation is moved there)")
    if cflags is not None and not cflags.strip():
        raise UserError("--cflags is empty", "give the C compiler's flags, e.g. "
                        "--cflags '-O3 -flto' (left out: the flavor's)")
    return list(configure)


def configure_args(flavor: str, cflags: str | None, extra: list[str]) -> list[str]:
    """configure's arguments for ``flavor`` with --cflags and --configure's."""
    return [*BASE_CONFIGURE, *FLAVORS[flavor].configure, *extra,
            f"CFLAGS={cflags if cflags is not None else FLAVORS[flavor].cflags}"]


def build_key(source: Source, flavor: str, patch_hashes: list[str], cflags: str | None,
              extra: list[str]) -> tuple[list[str], str, str]:
    """configure's arguments, the cache key (source, flavor, those arguments, the
    patches) and the custom trees' suffix ("" without --cflags or --configure)."""
    configure = configure_args(flavor, cflags, extra)
    custom = (hashlib.sha256(json.dumps([cflags, extra]).encode()).hexdigest()[:8]
              if cflags is not None or extra else "")
    key = hashlib.sha256(json.dumps([source.ident, flavor, configure,
                                     patch_hashes]).encode()).hexdigest()
    return configure, key, custom


def build(source_text: str, patches: list[Path], flavor: str = "release",
          name: str | None = None, jobs: int | None = None,
          progress: Callable[[str], None] = lambda _: None, *,
          cflags: str | None = None, configure_args: Sequence[str] = ()) -> Build:
    """Build (or find in the cache) PostgreSQL from ``source_text`` with ``patches``;
    ``cflags`` in place of the flavor's, ``configure_args`` after its own (both in the
    cache key, and in a tree of their own)."""
    if flavor not in FLAVORS:
        raise UserError(f"--flavor {flavor!r} is not a build flavor",
                        f"choose one of {', '.join(FLAVORS)}")
    extra = custom_flags(cflags, configure_args)
    texts = []
    for patch in patches:
        try:
            texts.append((patch.name, patch.read_bytes()))
        except OSError as exc:
            raise UserError(f"--patch {patch}: {exc.strerror}",
                            "give a patch file (git diff or diff -u output)") from None
    if name is not None:
        check_name(name)
    _require(BUILD_DEPS, "from source")
    source = resolve_source(source_text)
    patch_ids = [{"name": n, "sha256": hashlib.sha256(t).hexdigest()} for n, t in texts]
    configure, key, custom = build_key(source, flavor, [p["sha256"] for p in patch_ids],
                                       cflags, extra)
    root = paths.builds_dir()
    with _locked(root):
        done = next((b for b in list_builds() if b.key == key and name in (None, b.name)),
                    None)
        # A source tree is whatever it holds now: never taken from the cache.
        if (done is not None and source.kind != "tree"
                and done.installed):
            return done
        tree = tree_dir(source, flavor, custom)
        version = _prepare_tree(source, tree, progress)
        name = name or _default_name(version, flavor, key if texts or custom else None)
        if not (tree / "src" / "backend" / "parser" / "gram.c").exists():
            _require(PARSER_DEPS, f"{version} from this source (it has no generated parser)")
        _apply_patches(tree, texts, progress)
        started = time.monotonic()
        _configure(tree, configure, progress)
        _make(tree, jobs, progress)
        meta = Build(name=name, key=key, source=source.describe, flavor=flavor,
                     patches=patch_ids, configure=configure, version=version,
                     seconds=round(time.monotonic() - started, 1),
                     created_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        _install(tree, root / "installs" / name, meta, progress)
        return meta


def changes_files(patch: bytes) -> bool:
    """Whether a patch changes any file (``git diff`` of nothing is empty)."""
    changed, added = _paths_in(patch)
    return bool(changed or added)


def copy_build(built: Build, name: str,
               progress: Callable[[str], None] = lambda _: None) -> Build:
    """``built``'s installation copied under another ``name`` (cached like a build):
    the same bytes in a second installation, for a comparison whose two sides must be
    two builds (each a cluster of its own) of the same source. A copy, not links: the
    commit anatomy's uprobes are placed per file, and each side's are its own."""
    check_name(name)
    key = hashlib.sha256(f"{built.key}:copy".encode()).hexdigest()
    root = paths.builds_dir()
    with _locked(root):
        done = find_build(name)
        if done is not None and done.key == key and done.installed:
            return done
        final = root / "installs" / name
        progress(f"copying {built.name} into {final}")
        staging = final.parent / f".{final.name}.{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            shutil.copytree(built.bin_dir.parent, staging, symlinks=True)
            meta = Build(**{**asdict(built), "name": name, "key": key, "copy_of": built.name,
                            "seconds": 0.0,
                            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
            (staging / "build.json").write_text(json.dumps(asdict(meta), indent=2))
            _reachable(staging)
            old = final.parent / f".{final.name}.old.{os.getpid()}"
            if final.exists():
                final.rename(old)
            staging.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return meta


def _default_name(version: str, flavor: str, key: str | None) -> str:
    """pg18.6-release, pg18.6-release-3f2a9c1b with patches or flags of its own (their
    hash, with the rest)."""
    return f"pg{version}-{flavor}" + (f"-{key[:8]}" if key else "")


# --- the tree ------------------------------------------------------------------------


@dataclass
class TreeState:
    """What was done to a build tree (``.syncrep/state.json``)."""

    applied: list[str] = field(default_factory=list)  # the patches' sha256, in order
    touched: list[str] = field(default_factory=list)  # changed (saved in .syncrep/pristine)
    added: list[str] = field(default_factory=list)  # created by the patches
    configure: list[str] | None = None  # the flags it was configured with


def _state(tree: Path) -> TreeState:
    try:
        return TreeState(**json.loads((tree / ".syncrep" / "state.json").read_text()))
    except (OSError, ValueError, TypeError):
        return TreeState()


def _save_state(tree: Path, state: TreeState) -> None:
    path = tree / ".syncrep" / "state.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(state)))
    tmp.replace(path)


def _tree_version(tree: Path) -> str:
    text = (tree / "configure").read_text(errors="replace")
    match = re.search(r"PACKAGE_VERSION='([^']+)'", text)
    return match.group(1) if match else "unknown"


def _prepare_tree(source: Source, tree: Path, progress: Callable[[str], None]) -> str:
    """The build tree of this source and flavor: unpacked once (a tarball) or brought up
    to date with the source tree (only files that changed are copied, so make rebuilds
    only what they touch). Returns the PostgreSQL version it holds."""
    if source.kind == "tree":
        _revert(tree)
        progress(f"syncing the build tree with {source.path}")
        _sync(source.path, tree)
    elif not (tree / "configure").exists():
        progress(f"unpacking {source.path.name}")
        tmp = tree.with_name(f".{tree.name}.{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            with tarfile.open(source.path) as tar:
                if hasattr(tarfile, "data_filter"):  # 3.11.4+: no path outside tmp
                    tar.extractall(tmp, filter="data")
                else:
                    tar.extractall(tmp)
            tops = [p for p in tmp.iterdir() if p.is_dir()]
            if len(tops) != 1 or not (tops[0] / "configure").exists():
                raise UserError(f"{source.path} does not unpack to one PostgreSQL source "
                                "folder", "give a PostgreSQL release tarball")
            shutil.rmtree(tree, ignore_errors=True)
            tops[0].rename(tree)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    else:
        _revert(tree)
    return _tree_version(tree)


def _sync(src: Path, dst: Path) -> None:
    """Copy what differs in ``src`` into ``dst``. A copied file gets the time of the copy,
    not the source's: a file put back from an older source time (after a patch was
    reverted, say) must still be newer than the objects compiled from the patched one,
    or make would keep them. Files of the same size are compared by content (about a
    second for PostgreSQL's tree), so an unchanged file is never copied again."""
    for folder, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d != ".git"]
        rel = Path(folder).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            a, b = Path(folder) / name, dst / rel / name
            with contextlib.suppress(FileNotFoundError):
                if b.stat().st_size == a.stat().st_size and b.read_bytes() == a.read_bytes():
                    continue
            shutil.copy2(a, b)
            os.utime(b)


# --- patches -------------------------------------------------------------------------


def _paths_in(patch: bytes) -> tuple[list[str], list[str]]:
    """The files a unified diff (applied with -p1) changes, and those it adds."""
    changed: list[str] = []
    added: list[str] = []
    old = None
    for raw in patch.decode(errors="replace").splitlines():
        if raw.startswith("--- "):
            old = raw[4:].split("\t")[0].strip()
        elif raw.startswith("+++ ") and old is not None:
            new = raw[4:].split("\t")[0].strip()
            path = (new if new != "/dev/null" else old).split("/", 1)[-1]
            (added if old == "/dev/null" else changed).append(path)
            old = None
    return changed, added


def _revert(tree: Path) -> None:
    """Undo the patches last applied: touched files back from their saved copies, added
    files removed. Each restored file gets a new mtime, so make rebuilds it."""
    state = _state(tree)
    pristine = tree / ".syncrep" / "pristine"
    for rel in state.touched:
        saved = pristine / rel
        if saved.exists():
            shutil.copyfile(saved, tree / rel)
    for rel in state.added:
        (tree / rel).unlink(missing_ok=True)
    shutil.rmtree(pristine, ignore_errors=True)
    state.applied, state.touched, state.added = [], [], []
    _save_state(tree, state)


def _apply_patches(tree: Path, texts: list[tuple[str, bytes]],
                   progress: Callable[[str], None]) -> None:
    """Apply the patches in order; if one does not apply, the ones before it are undone
    and the error names the hunk that failed."""
    touched: list[str] = []
    added: list[str] = []
    pristine = tree / ".syncrep" / "pristine"
    for name, text in texts:
        changed, new = _paths_in(text)
        if not changed and not new:
            _record(tree, [], touched, added)
            _revert(tree)
            raise UserError(f"--patch {name} holds no file changes (no ---/+++ lines)",
                            "give unified diff output (git diff, diff -u)")
        for rel in changed:
            if rel not in touched and (tree / rel).exists():
                (pristine / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(tree / rel, pristine / rel)
                touched.append(rel)
        added += [rel for rel in new if rel not in added]
        # recorded before the patch runs: an interrupted patch is still undone next time
        _record(tree, [], touched, added)
        progress(f"applying {name}")
        res = subprocess.run(["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch",
                              "-r", "-", "-d", str(tree)], input=text, capture_output=True,
                             check=False)
        if res.returncode != 0:
            _revert(tree)
            failed = [ln for ln in res.stdout.decode(errors="replace").splitlines()
                      if "FAILED" in ln or "can't find file" in ln or "malformed" in ln]
            raise UserError(f"--patch {name} does not apply to this source: "
                            f"{'; '.join(failed) or _tail(res.stdout + res.stderr)}",
                            "rebase the patch on this version (patch -p1 from the top of "
                            "the source tree); nothing was built or cached")
    _record(tree, [hashlib.sha256(t).hexdigest() for _, t in texts], touched, added)


def _record(tree: Path, applied: list[str], touched: list[str], added: list[str]) -> None:
    state = _state(tree)
    state.applied, state.touched, state.added = applied, list(touched), list(added)
    _save_state(tree, state)


def _tail(output: bytes, lines: int = 6) -> str:
    text = output.decode(errors="replace").strip().splitlines()
    return " | ".join(text[-lines:]) or "(no output)"


# --- configure, make, install --------------------------------------------------------


def _run(argv: list[str], tree: Path, what: str, log: Path, timeout: float = 3600) -> None:
    with open(log, "ab") as fh:
        start = fh.tell()  # the log holds earlier builds' output too
        fh.write(f"\n$ {' '.join(argv)}\n".encode())
        fh.flush()
        try:
            res = subprocess.run(argv, cwd=tree, stdout=fh, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise UserError(f"{what} did not finish in {timeout:.0f} s (log: {log})",
                            "look at the log; a smaller --jobs may help on a small "
                            "machine") from None
    if res.returncode != 0:
        with open(log, "rb") as fh:
            fh.seek(start)
            lines = fh.read().decode(errors="replace").strip().splitlines()
        # make -j goes on with its other jobs after a compiler's error: the error is
        # named first, whatever the log's last lines are
        errors = [ln for ln in lines if ": error: " in ln or ": fatal error: " in ln][:5]
        said = ("the compiler's errors:\n    " + "\n    ".join(errors) + "\n  "
                if errors else "")
        raise UserError(f"{what} failed (exit {res.returncode}); {said}the end of {log}:"
                        "\n    " + "\n    ".join(lines[-8:]),
                        "fix what the log names (a missing -dev package, a patch that does "
                        "not compile); nothing was cached")


def _configure(tree: Path, configure: list[str], progress: Callable[[str], None]) -> None:
    if _state(tree).configure == configure and (tree / "config.status").exists():
        return
    progress("configure")
    state = _state(tree)
    state.configure = None  # a configure that fails leaves the tree to be configured again
    _save_state(tree, state)
    _run(["./configure", f"--prefix={PREFIX}", *configure], tree, "configure",
         tree / ".syncrep" / "build.log")
    state = _state(tree)
    state.configure = configure
    _save_state(tree, state)


def _make(tree: Path, jobs: int | None, progress: Callable[[str], None]) -> None:
    progress("make")
    # $$ is make's $: the linker gets $ORIGIN, so the programs find ../lib wherever
    # the installation is moved to.
    _run(["make", f"-j{jobs or os.cpu_count() or 1}", "-s", "rpathdir=$$ORIGIN/../lib"],
         tree, "make", tree / ".syncrep" / "build.log")


def _install(tree: Path, final: Path, meta: Build, progress: Callable[[str], None]) -> None:
    progress(f"installing into {final}")
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.parent / f".{final.name}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _run(["make", "-s", "install", f"DESTDIR={staging}", "rpathdir=$$ORIGIN/../lib"],
             tree, "make install", tree / ".syncrep" / "build.log")
        installed = staging / PREFIX.lstrip("/")
        (installed / "build.json").write_text(json.dumps(asdict(meta), indent=2))
        _reachable(installed)
        old = final.parent / f".{final.name}.old.{os.getpid()}"
        if final.exists():
            final.rename(old)
        installed.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _reachable(root: Path) -> None:
    """Servers run as an unprivileged account: every folder readable and enterable."""
    for folder, _dirs, _files in os.walk(root):
        os.chmod(folder, 0o755)
