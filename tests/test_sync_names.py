"""synchronous_standby_names: our parser against PostgreSQL's own."""

from __future__ import annotations

import doctest
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from syncrep_lab.cluster.build import UpOptions, up
from syncrep_lab.cluster.manifest import Manifest
from syncrep_lab.cluster.teardown import remove_cluster
from syncrep_lab.errors import UserError
from syncrep_lab.pg import sync_names
from syncrep_lab.pg.sync_names import EITHER, SyncSpec, expect, expected_states, parse


def test_doctests() -> None:
    result = doctest.testmod(sync_names)
    assert result.attempted >= 5
    assert result.failed == 0


@pytest.mark.parametrize(
    ("text", "method", "num", "names"),
    [
        ("b", "first", 1, ("b",)),
        ("b, c", "first", 1, ("b", "c")),
        ("1(b,c)", "first", 1, ("b", "c")),
        ("FIRST 2 (b, c, d)", "first", 2, ("b", "c", "d")),
        ("first 1 (b)", "first", 1, ("b",)),
        ("ANY 2 (b,c,d)", "any", 2, ("b", "c", "d")),
        ("any 1 (*)", "any", 1, ("*",)),
        ('"Weird Name", "x""y"', "first", 1, ("Weird Name", 'x"y')),
        ('ANY 1 ("first", "any")', "any", 1, ("first", "any")),
        ("*", "first", 1, ("*",)),
        ("3", "first", 1, ("3",)),
        ("s$1, _x", "first", 1, ("s$1", "_x")),
    ],
)
def test_forms(text: str, method: str, num: int, names: tuple[str, ...]) -> None:
    assert parse(text) == SyncSpec(method, num, names)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text", ["ANY 0 (b)", "2 (", "b c", "ANY (b)", "FIRST b", "(b)", "b,", '"', "b; c", "ANY 1 ()"]
)
def test_rejected(text: str) -> None:
    with pytest.raises(UserError, match="does not parse"):
        parse(text)


def test_96_has_no_keywords() -> None:
    assert parse("ANY, FIRST", version_num=90624) == SyncSpec("first", 1, ("ANY", "FIRST"))
    with pytest.raises(UserError):
        parse("ANY 1 (b)", version_num=90624)
    spec = parse("FIRST 1 (b, c)")
    assert spec is not None
    assert spec.render_for(90624) == "1 (b, c)"
    quorum = parse("ANY 1 (b, c)")
    assert quorum is not None
    with pytest.raises(UserError, match="PostgreSQL 10"):
        quorum.render_for(90624)


def test_empty_means_asynchronous() -> None:
    assert parse("") is None
    with pytest.raises(UserError):
        parse("  \t ")
    assert expected_states(None, ["b", "c"]) == {"b": "async", "c": "async"}


@pytest.mark.parametrize(
    ("text", "standbys", "states"),
    [
        ("1(b,c)", ["b", "c"], {"b": "sync", "c": "potential"}),
        ("1(c,b)", ["b", "c"], {"b": "potential", "c": "sync"}),
        ("2(b,c,d)", ["b", "c", "d"], {"b": "sync", "c": "sync", "d": "potential"}),
        ("ANY 1 (b,c)", ["b", "c"], {"b": "quorum", "c": "quorum"}),
        ("b", ["b", "c"], {"b": "sync", "c": "async"}),
        ("1(B)", ["b"], {"b": "sync"}),
        ("1(c, *)", ["b", "c", "d"], {"c": "sync", "b": "potential", "d": "potential"}),
        # equal priority across the num_sync boundary: PostgreSQL picks by walsender
        # slot order (the order of connecting), not by name
        ("2(*)", ["s1", "s2", "s3", "s4"], dict.fromkeys(["s1", "s2", "s3", "s4"], EITHER)),
        ("2(c, *)", ["b", "c", "d"], {"c": "sync", "b": EITHER, "d": EITHER}),
        ("2(*)", ["b", "c"], {"b": "sync", "c": "sync"}),
    ],
)
def test_expected_states(text: str, standbys: list[str], states: dict[str, str]) -> None:
    assert expected_states(parse(text), standbys) == states


def test_where_names_do_not_decide_counts_do() -> None:
    expected = expect(parse("2(*)"), ["s1", "s2", "s3", "s4"])
    assert expected.sync == 2 and expected.synchronous == 2
    assert expected.met({"s1": "sync", "s4": "sync", "s2": "potential", "s3": "potential"})
    assert not expected.met({"s1": "sync", "s2": "potential", "s3": "potential",
                             "s4": "potential"})
    assert not expected.met({"s1": "sync", "s2": "sync", "s3": "sync", "s4": "potential"})
    assert not expected.met({"s1": "sync", "s2": "sync", "s3": "potential"})  # s4 missing
    quorum = expect(parse("ANY 1 (b, c)"), ["b", "c", "d"])
    assert quorum.sync is None and quorum.synchronous == 2
    assert quorum.met({"b": "quorum", "c": "quorum", "d": "async"})


# --- against the real server -------------------------------------------------------

TOKENS = [
    "ANY", "any", "FIRST", "First", "0", "1", "2", "12", "b", "c", "B", "x$1", "_a", "9x",
    '"q"', '"a b"', '""', '"x""y"', '"any"', "*", ",", ",", "(", ")", "(", ")", " ", " ",
    "\t", "é", "-", "'", ".", "\v", "\f", "\r", "#", "$", "a-b",
]

# No newlines: ALTER SYSTEM refuses any value holding one, whatever the setting, so
# the server cannot judge them (and no postgresql.conf line can hold one either).
candidates = st.lists(st.sampled_from(TOKENS), max_size=9).map("".join) | st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00\n"), max_size=12
)


def _server_accepts(conn: psycopg.Connection[tuple[object, ...]], text: str) -> bool:
    try:
        conn.execute(
            sql.SQL("alter system set synchronous_standby_names = {}").format(sql.Literal(text))
        )
    except psycopg.OperationalError:
        raise
    except psycopg.DatabaseError:  # the check hook's error: invalid value, syntax error
        return False
    return True


@pytest.fixture(scope="module", params=["18", "9.6"])
def single_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[tuple[Manifest, int]]:
    if request.param == "9.6":
        request.getfixturevalue("pg96")
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="srl-sn-", dir="/tmp"))
    base.chmod(0o755)
    manifest = up(UpOptions(dir=base / "c", pg=request.param, standbys=0))
    version_num = 90624 if request.param == "9.6" else 180000
    try:
        yield manifest, version_num
    finally:
        remove_cluster(manifest.dir)
        base.rmdir()


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=candidates)
def test_parser_agrees_with_postgresql(single_server: tuple[Manifest, int], text: str) -> None:
    manifest, version_num = single_server
    with psycopg.connect(manifest.admin_conninfo(manifest.primary), autocommit=True) as conn:
        accepted = _server_accepts(conn, text)
    spec: SyncSpec | None = None
    try:
        spec = parse(text, version_num=version_num)
        ours = True
    except UserError:
        ours = False
    assert ours == accepted, f"{text!r}: server {'accepts' if accepted else 'rejects'} it"
    if spec is not None:
        # What we write back into postgresql.conf must mean the same thing.
        assert parse(spec.render_for(version_num), version_num=version_num) == spec
