"""Whether a primary can acknowledge commits that wait for a standby, from what its
pg_stat_replication shows (the rows as PostgreSQL gives them; the end-to-end checks on
real clusters are in test_attach_harm.py)."""

from __future__ import annotations

from syncrep_lab.pg.replication import Walsender, shortfall


def ws(name: str, sync_state: str, state: str = "streaming") -> Walsender:
    return Walsender(name, state, sync_state)


def test_enough_synchronous_standbys_pass() -> None:
    assert shortfall("1(b,c)", [ws("b", "sync"), ws("c", "potential")], 180000) is None
    assert shortfall("ANY 2 (b,c,d)", [ws("b", "quorum"), ws("c", "quorum")], 180000) is None
    assert shortfall("2 (b, c)", [ws("b", "sync"), ws("c", "sync")], 90624) is None


def test_default_walreceiver_names_are_explained() -> None:
    seen = [ws("walreceiver", "async"), ws("walreceiver", "async")]
    problem = shortfall("1(b,c)", seen, 150000)
    assert problem is not None
    cause, fix = problem
    assert "asks for 1 synchronous standby and the primary has 0" in cause
    assert "walreceiver streaming async, walreceiver streaming async" in cause
    assert "postgresql.auto.conf" in cause and "application_name=" in fix


def test_too_few_named_standbys() -> None:
    problem = shortfall("FIRST 2 (b, c)", [ws("b", "sync")], 180000)
    assert problem is not None
    assert "asks for 2 synchronous standbys and the primary has 1" in problem[0]
    assert "c named in synchronous_standby_names is not connected" in problem[0]


def test_no_standby_and_not_yet_streaming() -> None:
    none = shortfall("b", [], 180000)
    assert none is not None and "no standby is connected" in none[0]
    catching_up = shortfall("b", [ws("b", "async", state="catchup")], 180000)
    assert catching_up is not None and "b is not streaming yet" in catching_up[0]


def test_empty_setting_means_commits_wait_for_nothing() -> None:
    problem = shortfall("", [ws("b", "async")], 180000)
    assert problem is not None and "would measure local under another name" in problem[0]


def test_a_proposed_setting_is_judged_by_its_names() -> None:
    """Before the run sets it, the states it would give count, not today's."""
    seen = [ws("b", "async"), ws("c", "async")]
    assert shortfall("FIRST 1 (c)", seen, 180000, proposed=True) is None
    problem = shortfall("FIRST 1 (d)", seen, 180000, proposed=True)
    assert problem is not None and "would have 0" in problem[0]
    assert "d named in synchronous_standby_names is not connected" in problem[0]
