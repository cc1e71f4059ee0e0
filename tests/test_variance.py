"""Where a cell's noise sits (stats/variance.py) and the smallest effect a run detects
(stats/intervals.detectable_effect): on values worked out by hand, on synthetic series
whose parts are known, and as results, the report and compare show them on a store."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import random
import statistics
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from syncrep_lab.analysis.cells import CellRow, cell_rows
from syncrep_lab.analysis.compare import compare_runs
from syncrep_lab.analysis.noise import (
    CellNoise,
    budget_sentences,
    repeat_overhead,
    walsender_words,
)
from syncrep_lab.analysis.ratios import BaselineRatio, target_text
from syncrep_lab.stats.intervals import (
    detectable_effect,
    paired_ratio,
    pearson,
    ratio_ci,
    rounds_for,
    t_ppf,
)
from syncrep_lab.stats.variance import (
    MIN_REPEAT_S,
    NoiseSplit,
    Repeat,
    noise_split,
    pooled_split,
    repeat_length,
)
from syncrep_lab.store import ProbeRows, ProcCostRow, ReplicationSample, SampleRow, Store
from syncrep_lab.terminal.results import no_difference_text, noise_text, print_results
from tests.data.runs.refresh import load

UP, DOWN, FLAT = [6.0, -6.0, -6.0, 6.0], [-6.0, 6.0, 6.0, -6.0], [0.0] * 4


def _repeats(means: list[float], patterns: list[list[float]]) -> list[Repeat]:
    return [Repeat(m, [m + x for x in p]) for m, p in zip(means, patterns, strict=True)]


def test_a_split_worked_by_hand() -> None:
    """Seconds ±6 around their repeat's mean, in patterns whose profile is 0 (every
    position averages 0 over the repeats). Pooled over the 3 repeats, with each sum
    divided by 1 - 1/3 for the profile taken out: Σ(x - x̄)² = 8·36·1.5 = 432,
    Σ(x_t - x̄)(x_t+1 - x̄) = -2·36·1.5 = -108; for n = 4 the equations read
    9a - 4.5b = 432 and -2.25a + 4.875b = -108, so a = 48, b = 0 and
    within² = a/4 = 12 (independent seconds: the plain lag-1 correlation is -1/4)."""
    drift = noise_split(_repeats([96, 100, 104], [UP, DOWN, FLAT]))
    # S² = 16, Q = (4² + 4²) / (2·2) = 8: between² = max(0, 8 - 12) = 0, drift² = 8
    assert (drift.repeats, drift.seconds, drift.seconds_per_repeat) == (3, 12, 4.0)
    assert drift.lag1 == pytest.approx(0.0, abs=1e-12)
    assert drift.lag1_raw == pytest.approx(-108 / 432)
    assert drift.within == pytest.approx(math.sqrt(12) / 100)
    assert drift.between == 0.0
    assert drift.drift == pytest.approx(math.sqrt(8) / 100)
    assert drift.total == pytest.approx(4 / 100)
    assert drift.short_term == pytest.approx(math.sqrt(8) / 100)
    assert drift.dominant == "within" and drift.note is None
    # The same repeats in another order: S² = 64, Q = (8² + 16²) / 4 = 80, so no drift
    # and between² = 80 - 12 = 68.
    jumpy = noise_split(_repeats([100, 92, 108], [UP, DOWN, FLAT]))
    assert jumpy.within == pytest.approx(math.sqrt(12) / 100)
    assert jumpy.between == pytest.approx(math.sqrt(68) / 100)
    assert jumpy.drift == 0.0
    assert jumpy.dominant == "between"
    assert jumpy.dominant_share == pytest.approx(68 / 80)


def _synthetic(k: int, n: int, *, second_sd: float, between_sd: float,
               drift_per_round: float = 0.0, first_second: float = 0.0,
               seed: int = 1) -> list[Repeat]:
    """k repeats of n seconds around 1000 TPS: each repeat's level drawn at its start
    (relative sd ``between_sd``) plus a drift per round, its seconds independent
    around it (relative sd ``second_sd``), the first second lower by ``first_second``
    in every repeat."""
    rng = random.Random(seed)
    out = []
    for i in range(k):
        level = 1000 * (1 + rng.gauss(0, between_sd) + drift_per_round * i)
        xs = [level * (1 + rng.gauss(0, second_sd)) for _ in range(n)]
        xs[0] -= 1000 * first_second
        out.append(Repeat(statistics.fmean(xs), xs))
    return out


def test_a_known_start_state_is_recovered() -> None:
    """Over 40 seeds the estimate of an 8 % start state ran from 6.0 to 10.1 %, the
    drift (none) from 0 to 4 %: each part is a difference of noisy variances."""
    split = noise_split(_synthetic(120, 5, second_sd=0.10, between_sd=0.08))
    assert split.within == pytest.approx(0.10 / math.sqrt(5), rel=0.15)
    assert split.between == pytest.approx(0.08, rel=0.25)
    assert split.drift is not None and split.drift < 0.05
    assert split.dominant == "between" and split.dominant_told
    assert split.between_p is not None and split.between_p < 0.001


def test_independent_seconds_leave_nothing_between_or_drifting() -> None:
    split = noise_split(_synthetic(200, 5, second_sd=0.10, between_sd=0.0))
    assert split.within == pytest.approx(0.10 / math.sqrt(5), rel=0.1)
    assert split.between is not None and split.between < 0.02
    assert split.drift is not None and split.drift < 0.02
    assert split.dominant == "within"
    assert split.between_p is not None and split.between_p > 0.05
    assert split.drift_p is not None and split.drift_p > 0.05
    # around its own 5-second mean, an independent second looks anticorrelated by -1/5;
    # the moment equations take that bias out
    assert split.lag1_raw == pytest.approx(-0.2, abs=0.03)
    assert split.lag1 == pytest.approx(0.0, abs=0.05)


def test_a_slow_drift_is_drift() -> None:
    split = noise_split(_synthetic(30, 5, second_sd=0.05, between_sd=0.01,
                                   drift_per_round=0.01))
    # a straight line of 30 steps of 1 %: sd 0.01 · sd(0..29) = 8.8 %
    assert split.drift == pytest.approx(0.01 * statistics.stdev(range(30)), rel=0.2)
    assert split.dominant == "drift"
    assert split.drift_p is not None and split.drift_p < 0.001


def test_a_profile_every_repeat_shares_is_not_noise() -> None:
    """A first second 30 % low in every repeat moves every repeat's mean alike: the
    seconds' part is the same in TPS (relative to a mean 6 % lower)."""
    flat_repeats = _synthetic(40, 5, second_sd=0.10, between_sd=0.05, seed=3)
    ramp_repeats = _synthetic(40, 5, second_sd=0.10, between_sd=0.05, seed=3,
                              first_second=0.3)
    flat, ramp = noise_split(flat_repeats), noise_split(ramp_repeats)
    assert flat.within is not None and ramp.within is not None
    mean_flat = statistics.fmean(r.mean for r in flat_repeats)
    mean_ramp = statistics.fmean(r.mean for r in ramp_repeats)
    assert mean_ramp == pytest.approx(mean_flat - 60)
    assert ramp.within * mean_ramp == pytest.approx(flat.within * mean_flat)


def test_the_tests_hold_their_level() -> None:
    """Without a start state or a drift, each part is called there in about 1 in 20
    sets of 10 repeats (200 sets here: 10 expected; binomial sd 3)."""
    splits = [noise_split(_synthetic(10, 5, second_sd=0.10, between_sd=0.0, seed=s))
              for s in range(200)]
    assert sum((s.between_p or 1) < 0.05 for s in splits) <= 18
    assert sum((s.drift_p or 1) < 0.05 for s in splits) <= 18


def test_few_repeats_missing_seconds_and_short_series() -> None:
    two = noise_split(_repeats([96, 104], [UP, DOWN]))
    assert two.within is not None and two.between is None and two.drift is None
    assert two.total == pytest.approx(statistics.stdev([96, 104]) / 100)
    assert two.note == "between and drift need 3 repeats or more" and two.dominant is None
    blind = noise_split([Repeat(m) for m in (96, 100, 104)])
    assert (blind.within, blind.between, blind.seconds) == (None, None, 0)
    assert blind.drift == pytest.approx(math.sqrt(8) / 100)
    assert blind.note == "no per-second samples, so no within part"
    assert noise_split([]).note == "no measured repeat with a positive mean"
    # non-finite seconds are left out, and skip_first drops the first ones
    holed = noise_split([Repeat(100, [90, math.nan, 110, 100]) for _ in range(3)],
                        skip_first=1)
    assert holed.seconds == 6 and holed.seconds_per_repeat == 2.0
    # series of 2 seconds say nothing about the correlation: b = 0
    pairs = noise_split(_repeats([95, 105, 100], [[5, -5], [-5, 5], [0, 0]]))
    assert pairs.lag1 == 0.0
    with pytest.raises(ValueError):
        noise_split([], skip_first=-1)


def test_pooled_split_weights_by_repeats() -> None:
    a = NoiseSplit(3, 15, 5.0, 0.04, 0.10, 0.0, 0.11, 0.10, 0.0, -0.2, None)
    b = NoiseSplit(5, 25, 5.0, 0.06, 0.05, 0.02, 0.08, 0.08, 0.1, -0.1, None)
    pooled = pooled_split([a, b])
    assert pooled is not None and (pooled.repeats, pooled.seconds) == (8, 40)
    # weights 2 and 4: √((2·0.04² + 4·0.06²)/6)
    assert pooled.within == pytest.approx(math.sqrt((2 * 0.04**2 + 4 * 0.06**2) / 6))
    assert pooled.lag1 == pytest.approx((2 * 0.0 + 4 * 0.1) / 6)
    assert pooled_split([]) is None


def test_detectable_effect_by_hand() -> None:
    # (t(0.975, 9) + t(0.80, 9)) · se = (2.262157 + 0.883404) · 0.02
    assert detectable_effect(0.02, 9) == pytest.approx((2.262157 + 0.883404) * 0.02,
                                                      rel=1e-5)
    # a normal test's 2.8 se with many degrees of freedom
    assert detectable_effect(1.0, 1e6) == pytest.approx(1.959964 + 0.841621, rel=1e-5)
    assert detectable_effect(0.02, 9, 0.90, 0.5) == pytest.approx(t_ppf(0.95, 9) * 0.02)
    for bad in ({"se": -1.0, "df": 3.0}, {"se": 1.0, "df": 0.0},
                {"se": 1.0, "df": 3.0, "power": 1.0}):
        with pytest.raises(ValueError):
            detectable_effect(**bad)
    r = ratio_ci([110, 120, 100], [100, 100, 100, 100])
    assert r.se is not None and r.df is not None
    assert r.high == pytest.approx(r.ratio + t_ppf(0.975, r.df) * r.se)
    p = paired_ratio([110, 240, 300], [100, 200, 300])
    assert p.log_sd is not None and p.log_se == pytest.approx(p.log_sd / math.sqrt(3))


SPEC = """\
name = "noise"

[workload]
clients = 4
duration = 5

[matrix]
synchronous_commit = ["local", "on"]
"""


def _store_run(folder: Path) -> tuple[Path, dict[str, list[Repeat]]]:
    """A store with two cells measured in 6 interleaved rounds, seconds known."""
    store = Store(folder, create=True)
    written: dict[str, list[Repeat]] = {}
    try:
        run_id = store.create_run("noise", SPEC, {}, "test", seed=1, order_mode="interleaved")
        rng = random.Random(5)
        cells = []
        for idx, sync in enumerate(("local", "on")):
            params = {"synchronous_commit": sync, "clients": 4}
            cells.append(store.ensure_cell(run_id, idx, sync, f"sc={sync}",
                                           {"synchronous_commit": sync}, params))
        for rnd in range(1, 7):
            for cell, base in zip(cells, (1000.0, 800.0), strict=True):
                level = base * (1 + rng.gauss(0, 0.08))
                seconds = [level * (1 + rng.gauss(0, 0.05)) for _ in range(5)]
                tps = statistics.fmean(seconds)
                written.setdefault(cell.label, []).append(Repeat(tps, seconds))
                store.add_repeat(cell.id, {
                    "n": rnd, "started_at": f"2026-01-01T00:{rnd:02d}:0{cell.idx}",
                    "duration_s": 5.0, "transactions": int(5 * tps), "failed": 0, "tps": tps,
                    "histogram": b"", "round": rnd, "position": cell.idx},
                    [SampleRow(float(t + 1), x, 1.0, None, 0) for t, x in enumerate(seconds)])
        for cell in cells:
            store.update_cell(cell.id, status="done", repeats=6, stop_reason="ci")
    finally:
        store.close()
    return folder, written


def _noise(row: CellRow) -> CellNoise:
    assert row.noise is not None
    return row.noise


def test_rows_carry_the_noise_and_the_detectable_change(tmp_path: Path) -> None:
    folder, written = _store_run(tmp_path / "run")
    rows = {r.cell.label: r for r in cell_rows(folder)}
    for label, repeats in written.items():
        noise = _noise(rows[label]).to_json()  # what results --json prints
        expected = noise_split(repeats)
        assert set(noise) == {"within", "between", "drift", "repeats", "seconds",
                              "seconds_per_repeat", "total", "short_term", "lag1",
                              "lag1_raw", "dominant", "between_p", "drift_p", "note",
                              "repeat_overhead_s", "best_seconds", "time_at_best",
                              "walsender"}
        assert noise["walsender"] is None  # no sync names, no tracker's rows
        assert (noise["repeats"], noise["seconds"]) == (6, 30)
        for part in ("within", "between", "drift"):
            assert noise[part] == pytest.approx(getattr(expected, part))
        json.dumps(noise)  # plain JSON
    on = rows["sc=on"].ratio_to_baseline
    assert on is not None
    ratio: dict[str, Any] = on.to_json()  # what results --json prints
    logs = [math.log(a.mean / b.mean) for a, b in zip(written["sc=on"], written["sc=local"],
                                                      strict=True)]
    se = statistics.stdev(logs) / math.sqrt(6)
    assert ratio["paired"] and ratio["detectable_pct"] == pytest.approx(
        100 * (t_ppf(0.975, 5) + t_ppf(0.8, 5)) * se)
    # what the default ±3 % would take at this spread, and a round's time (a minute)
    assert ratio["spread_pct"] == pytest.approx(100 * statistics.stdev(logs))
    assert ratio["rounds_for_target"] == rounds_for(statistics.stdev(logs), math.log1p(0.03))
    assert ratio["rounds_for_target"] > 6 and ratio["round_s"] == 60.0


def test_the_results_text_says_where_the_noise_sits(tmp_path: Path) -> None:
    folder, _ = _store_run(tmp_path / "run")
    rows = cell_rows(folder)
    out = io.StringIO()
    print_results(folder, rows, Console(file=out, width=300, highlight=False))
    text = out.getvalue()
    lines = [line for line in text.splitlines() if line.startswith("noise per repeat:")]
    assert lines, text
    assert all("within" in line and "between" in line and "drift" in line for line in lines)
    assert any("(2 cells, 12 repeats)" in line or "(cell " in line for line in lines)
    assert budget_sentences(rows)  # the report's sentence on the budget
    needed = next(r.ratio_to_baseline.rounds_for_target for r in rows
                  if r.ratio_to_baseline)
    said = [line for line in text.splitlines() if "short of ±3 %" in line]
    assert len(said) == 1 and said[0].startswith("cell 1 sc=on ÷ sc=local: ±"), text
    assert said[0].endswith(f"±3 % needs about {needed} rounds ({needed:.0f} min at this "
                            "run's 60 s a round)"), said


def test_the_text_lines_by_hand() -> None:
    split = NoiseSplit(10, 50, 5.0, 0.041, 0.108, 0.020, 0.118, 0.11, 0.0, -0.19, None,
                       between_p=0.001, drift_p=0.4)
    assert noise_text("cell 3", split) == (
        "noise per repeat: within 4.1 %, between 10.8 %, drift 2.0 % (cell 3, 10 repeats): "
        "the state at a repeat's start dominates")
    even = NoiseSplit(4, 20, 5.0, 0.05, 0.06, 0.05, 0.09, 0.08, 0.0, -0.2, None,
                      between_p=0.3, drift_p=0.3)
    assert noise_text("2 cells", even).endswith(
        ": the state at a repeat's start is the largest part, though 4 repeats cannot "
        "tell it from none")
    def unpaired(mean: float, low: float | None, high: float | None,
                 detectable: float | None = None) -> BaselineRatio:
        return BaselineRatio("a", 0, mean, low, high, None, False, detectable)

    assert no_difference_text(unpaired(0.99, 0.95, 1.03, 5.04)) == (
        "no difference larger than 5.0 % (interval 0.95–1.03); the smallest change this "
        "run detects (80 % power): 5.0 %")
    assert no_difference_text(unpaired(0.8, 0.75, 0.85)) == ""
    assert no_difference_text(unpaired(0.8, None, None)) == ""
    short = BaselineRatio("a", 0, 1.0, 0.92, 1.08, 10, True, None, target_pct=3.0,
                          spread_pct=11.2, rounds_for_target=56, round_s=30.0)
    assert target_text(short) == (
        "±8.0 % after 10 rounds, short of ±3 %: the rounds' ratios spread by 11.2 %, so "
        "±3 % needs about 56 rounds (28 min at this run's 30 s a round)")
    assert target_text(dataclasses.replace(short, rounds_for_target=None)).endswith(
        "so ±3 % is out of reach of more rounds")
    within = dataclasses.replace(short, low=0.98, high=1.02)
    assert target_text(within) == ""  # within its target
    assert target_text(dataclasses.replace(short, paired=False)) == ""  # another kind


def test_rounds_for_a_target() -> None:
    """The fewest rounds whose t interval is within the target at a spread: that many
    are enough and one fewer is not."""
    for sd, half in ((0.10, 0.03), (0.05, 0.03), (0.2, 0.01), (0.03, 0.03)):
        n = rounds_for(sd, half)
        assert n is not None
        assert t_ppf(0.975, n - 1) * sd / math.sqrt(n) <= half
        assert n == 2 or t_ppf(0.975, n - 2) * sd / math.sqrt(n - 1) > half
    assert rounds_for(0.0, 0.03) == 2
    assert rounds_for(10.0, 0.001) is None  # past any count a run could make
    for bad in ((-0.1, 0.03), (0.1, 0.0), (math.nan, 0.03)):
        with pytest.raises(ValueError):
            rounds_for(*bad)


def test_stored_runs_show_noise_and_detectable(workdir: Path) -> None:
    run = load("pg18-local-on", workdir)
    rows = {r.cell.label: r for r in cell_rows(run)}
    noise = _noise(rows["sc=on"]).split
    assert noise.repeats == 2 and noise.between is None and (noise.within or 0) > 0
    ratio = rows["sc=on"].ratio_to_baseline
    assert ratio is not None and not ratio.paired and (ratio.detectable_pct or 0) > 0
    other = load("pg96-on", workdir)
    data = compare_runs(other, run, force=True)
    tps = data.pairs[0].figures[0]
    assert tps.figure == "TPS" and tps.detectable_pct is not None
    # with each run's drift in it: the interval's half width is t(0.975) se, the
    # detectable change (t(0.975) + t(0.8)) se
    assert tps.test is not None and tps.ratio is not None
    assert tps.ratio_high is not None and tps.ratio_low is not None
    df = tps.test.df
    half = (tps.ratio_high - tps.ratio_low) / 2 / tps.ratio
    assert tps.detectable_pct == pytest.approx(
        100 * half * (t_ppf(0.975, df) + t_ppf(0.8, df)) / t_ppf(0.975, df))


def _cost(split: NoiseSplit, length: float) -> float:
    """The variance of a mean over a fixed time, up to the time: (between² + σ₁²/L)(L + c)."""
    assert split.within is not None and split.between is not None
    assert split.seconds_per_repeat is not None and split.overhead_s is not None
    per_second = split.within ** 2 * split.seconds_per_repeat
    return (split.between ** 2 + per_second / length) * (length + split.overhead_s)


def test_the_repeat_length_that_narrows_an_interval_fastest() -> None:
    """Long repeats where the seconds are the noise and a repeat is dear, short ones
    where the start state is; the length found is the least of the cost around it."""
    dear = NoiseSplit(9, 90, 10.0, 0.02, 0.05, 0.0, None, None, None, None, None,
                      overhead_s=10.0)
    length = repeat_length(dear)
    assert length is not None and length.best_s is not None
    assert length.best_s == pytest.approx(4.0)
    for other in (3.2, 3.9, 4.1, 5.0, 10.0, 30.0):
        assert _cost(dear, length.best_s) <= _cost(dear, other)
    assert length.time_ratio == pytest.approx(_cost(dear, 4.0) / _cost(dear, 10.0))
    # 0.84 of the time: not worth a line (a fifth of the time or more is)
    assert "would reach the same interval" not in noise_text("cell 0", dear)
    cheap = dataclasses.replace(dear, overhead_s=0.1, between=0.10)
    fast = repeat_length(cheap)
    assert fast is not None and fast.best_s == MIN_REPEAT_S  # never under 3 s
    assert fast.time_ratio == pytest.approx(_cost(cheap, 3.0) / _cost(cheap, 10.0))
    assert noise_text("cell 0", cheap).endswith(
        f"; repeats of 3 s would reach the same interval in {fast.time_ratio:.2f} of the "
        "time (a repeat costs 0.1 s beside its 10 measured)")
    # no start state measured: longer is better, towards L / (L + c) of the time
    flat = dataclasses.replace(dear, between=0.0, seconds_per_repeat=2.0, overhead_s=8.0)
    longer = repeat_length(flat)
    assert longer is not None and longer.best_s is None
    assert longer.time_ratio == pytest.approx(2.0 / 10.0)
    assert "longer repeats would reach the same interval" in noise_text("cell 0", flat)
    assert repeat_length(dataclasses.replace(dear, between=None)) is None
    assert repeat_length(dataclasses.replace(dear, overhead_s=None)) is None


def test_a_repeat_s_cost_is_read_from_when_the_repeats_ran(workdir: Path) -> None:
    """The gap from one repeat's end to the next one's start, by hand from the stored
    run, against what results carries."""
    import sqlite3
    from datetime import datetime

    run = load("pg18-local-on", workdir)
    db = sqlite3.connect(run / "syncrep-lab.sqlite")
    try:
        rows = db.execute("select started_at, duration_s, probed from repeats "
                          "order by started_at").fetchall()
    finally:
        db.close()
    starts = [datetime.fromisoformat(r[0]) for r in rows]
    gaps = [(starts[i + 1] - starts[i]).total_seconds() - rows[i][1]
            for i in range(len(rows) - 1) if not rows[i][2]]
    gaps = [g for g in gaps if 0 <= g <= 600]
    assert gaps
    store = Store(run, create=False)
    try:
        overhead = repeat_overhead(store, store.run().id)
    finally:
        store.close()
    assert overhead == pytest.approx(statistics.median(gaps))
    assert {_noise(r).split.overhead_s for r in cell_rows(run)} == {overhead}


def test_pearson_by_hand() -> None:
    """x = 1..5, y = 2, 1, 4, 3, 6: the means 3 and 3.2, sxx = 10, syy = 14.8, sxy = 10,
    so r = 10 / √148 = 0.82199...; t = r √(3 / (1 − r²)) with 3 degrees of freedom,
    and scipy's own pearsonr agrees on both."""
    from scipy.stats import pearsonr

    c = pearson([1, 2, 3, 4, 5], [2, 1, 4, 3, 6])
    assert c is not None and c.n == 5
    assert c.r == pytest.approx(10 / math.sqrt(148))
    assert c.r2 == pytest.approx(100 / 148)
    t = c.r * math.sqrt(3 / (1 - c.r ** 2))
    # the t distribution with 3 degrees of freedom, integrated by hand:
    # P(T > t) = 1/2 − (atan(u) + u / (1 + u²)) / π with u = t / √3
    u = t / math.sqrt(3)
    assert c.p_value == pytest.approx(2 * (0.5 - (math.atan(u) + u / (1 + u * u)) / math.pi))
    expected = pearsonr([1, 2, 3, 4, 5], [2, 1, 4, 3, 6])
    assert (c.r, c.p_value) == pytest.approx((expected.statistic, expected.pvalue))
    negative = pearson([1, 2, 3, 4], [4, 3, 2, 1])
    assert negative is not None and (negative.r, negative.p_value) == (-1.0, 0.0)
    assert pearson([1, 2], [2, 1]) is None  # too few pairs
    assert pearson([1, 2, 3], [5, 5, 5]) is None  # y does not vary: r is 0/0
    with pytest.raises(ValueError):
        pearson([1, 2, 3], [1, 2])


# A cell's measured repeats: TPS and the run delay (ms in 5 s) of walsender:b and :c;
# the more b waited, the fewer commits.
WAL_TPS = [1000.0, 950.0, 1020.0, 900.0, 980.0, 870.0, 1010.0, 930.0]
WAL_B_MS = [300.0, 420.0, 250.0, 600.0, 380.0, 700.0, 280.0, 500.0]
WAL_C_MS = [90.0, 10.0, 50.0, 20.0, 70.0, 30.0, 60.0, 40.0]
WAL_B_MOVES = [400, 500, 450, 350, 600, 550, 420, 480]


def _walsender_store(folder: Path, *, repeats: int = len(WAL_TPS),
                     sync_state_of_c: bool = False) -> Path:
    """Two cells, local and on ('1(b,c)'), whose measured repeats carry the tracker's
    walsender rows; the on cell also has a probed repeat whose walsender waited most of
    it (left out: it is traced), and, with ``sync_state_of_c``, replication samples
    there that show c as the sync standby."""
    store = Store(folder, create=True)
    try:
        run_id = store.create_run("noise", SPEC, {}, "test", seed=1, order_mode="interleaved")
        cells = [store.ensure_cell(run_id, idx, sync, f"sc={sync}",
                                   {"synchronous_commit": sync},
                                   {"synchronous_commit": sync, "standbys": 2,
                                    "sync": "1(b,c)", "clients": 4})
                 for idx, sync in enumerate(("local", "on"))]
        for n in range(repeats):
            for cell in cells:
                rows = [ProcCostRow("primary", "walsender:b", 1, 10.0, 20.0, 100, 5,
                                    WAL_B_MS[n], WAL_B_MOVES[n]),
                        ProcCostRow("primary", "walsender:c", 1, 10.0, 20.0, 100, 5,
                                    WAL_C_MS[n], 10),
                        ProcCostRow("client", "pgbench", 4, 10.0, 20.0, 100, 5)]
                store.add_repeat(cell.id, {
                    "n": n + 1, "started_at": f"2026-01-01T00:{n:02d}:0{cell.idx}",
                    "duration_s": 5.0, "transactions": int(5 * WAL_TPS[n]), "failed": 0,
                    "tps": WAL_TPS[n], "histogram": b"", "round": n + 1,
                    "position": cell.idx},
                    [SampleRow(float(t + 1), WAL_TPS[n] + t, 1.0, None, 0) for t in range(5)],
                    ProbeRows(proc_costs=rows))
        probed = ProbeRows(proc_costs=[ProcCostRow("primary", "walsender:b", 1, 1.0, 1.0, 1, 1,
                                                   4000.0, 9000)])
        if sync_state_of_c:
            probed.replication_samples = [ReplicationSample(1.0, "b", "potential", None, None,
                                                            None, None),
                                          ReplicationSample(1.0, "c", "sync", None, None,
                                                            None, None)]
        store.add_repeat(cells[1].id, {
            "n": repeats + 1, "probed": 1, "started_at": "2026-01-01T01:00:00",
            "duration_s": 5.0, "transactions": 100, "failed": 0, "tps": 20.0,
            "histogram": b""}, [], probed)
        for cell in cells:
            store.update_cell(cell.id, status="done", repeats=repeats, stop_reason="ci")
    finally:
        store.close()
    return folder


def test_the_sync_walsender_s_wait_for_a_core_and_the_spread_it_explains(
        tmp_path: Path) -> None:
    """On the 8 measured repeats of the on cell: walsender:b (sync by '1(b,c)'), its
    run delay over each repeat's 5 s, r of log TPS against it by statistics.correlation,
    p by scipy's pearsonr; the probed repeat and walsender:c left out; the local cell's
    commits wait for no standby. results and the report's Method say it in a sentence."""
    from scipy.stats import pearsonr

    folder = _walsender_store(tmp_path / "run")
    rows = {r.cell.label: r for r in cell_rows(folder)}
    assert _noise(rows["sc=local"]).walsender is None
    found = _noise(rows["sc=on"]).walsender
    assert found is not None and found.correlation is not None
    ws: dict[str, Any] = found.to_json()  # what results --json prints
    shares = [ms / 1000 / 5.0 for ms in WAL_B_MS]
    logs = [math.log(t) for t in WAL_TPS]
    assert (ws["role"], ws["chosen_by"], ws["repeats"]) == (
        "walsender:b", "synchronous_standby_names", 8)
    assert ws["run_delay_share"]["per_repeat"] == pytest.approx(shares)
    assert ws["run_delay_share"]["mean"] == pytest.approx(statistics.fmean(shares))
    half = t_ppf(0.975, 7) * statistics.stdev(shares) / math.sqrt(8)
    assert ws["run_delay_share"]["low"] == pytest.approx(statistics.fmean(shares) - half)
    assert ws["migrations_per_s"] == pytest.approx(statistics.fmean(WAL_B_MOVES) / 5.0)
    r = statistics.correlation(logs, shares)
    assert r < -0.9 and ws["r"] == pytest.approx(r) and ws["r2"] == pytest.approx(r * r)
    assert ws["p"] == pytest.approx(pearsonr(logs, shares).pvalue)
    json.dumps(ws)
    words = (f"the sync walsender (walsender:b) waited for a core "
             f"{100 * statistics.fmean(shares):.1f} % of a repeat on average, from 5.0 to 14 "
             f"% over the 8 repeats; that explains {100 * r * r:.0f} % of the spread of the "
             f"repeats' TPS (r = −{abs(r):.2f}, p < 0.001: more waiting went with fewer "
             "commits)")
    assert walsender_words(found) == words
    out = io.StringIO()
    print_results(folder, list(rows.values()), Console(file=out, width=400, highlight=False))
    assert f"cell 1 sc=on: {words}" in out.getvalue().splitlines(), out.getvalue()
    assert f"Cell 1 sc=on: T{words[1:]}." in budget_sentences(list(rows.values()))
    # p of 5 % or more: the figures, no sentence
    assert walsender_words(dataclasses.replace(
        found, correlation=dataclasses.replace(found.correlation, p_value=0.05))) is None
    assert walsender_words(dataclasses.replace(found, correlation=None)) is None


def test_the_sync_walsender_is_the_one_the_primary_showed(tmp_path: Path) -> None:
    """Replication samples (a probed repeat's) that show c as sync outweigh the names;
    under 4 measured repeats there is a share but no correlation."""
    folder = _walsender_store(tmp_path / "run", sync_state_of_c=True)
    found = _noise(next(r for r in cell_rows(folder) if r.cell.label == "sc=on")).walsender
    assert found is not None
    ws: dict[str, Any] = found.to_json()
    assert (ws["role"], ws["chosen_by"]) == ("walsender:c", "pg_stat_replication")
    assert ws["run_delay_share"]["per_repeat"] == pytest.approx(
        [ms / 1000 / 5.0 for ms in WAL_C_MS])
    assert ws["migrations_per_s"] == pytest.approx(2.0)
    few = _walsender_store(tmp_path / "few", repeats=3)
    found = _noise(next(r for r in cell_rows(few) if r.cell.label == "sc=on")).walsender
    assert found is not None
    ws = found.to_json()
    assert ws["repeats"] == 3 and (ws["r"], ws["r2"], ws["p"]) == (None, None, None)
    assert walsender_words(found) is None
