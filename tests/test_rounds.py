"""The round scheduler and the paired statistics, on values worked out by hand and on
synthetic series (the real runs that use them are in test_run.py)."""

from __future__ import annotations

import math
import random

import pytest

from syncrep_lab.plan.baselines import baselines
from syncrep_lab.run.rounds import Member, Rounds, round_order
from syncrep_lab.stats.intervals import paired_ratio, stein_rounds, trend
from syncrep_lab.stats.pairing import crossover_units, paired, ratio_of, unpaired_rounds


def test_paired_ratio_against_hand_computed_values() -> None:
    # log ratios ln(1.1), ln(1.2), ln(1.0): mean 0.0925, sd 0.0912, t(2, 0.975) = 4.3027
    r = paired_ratio([110, 240, 300], [100, 200, 300])
    logs = [math.log(1.1), math.log(1.2), 0.0]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    assert r.rounds == 3
    assert r.mean == pytest.approx(math.exp(mean))
    assert r.mean == pytest.approx(1.0970, abs=1e-4)
    assert r.low == pytest.approx(math.exp(mean - 4.302653 * sd / math.sqrt(3)), rel=1e-5)
    assert r.high == pytest.approx(math.exp(mean + 4.302653 * sd / math.sqrt(3)), rel=1e-5)
    inverse = paired_ratio([100, 200, 300], [110, 240, 300])
    assert inverse.low is not None and r.high is not None
    assert inverse.low == pytest.approx(1 / r.high)  # B/A is the inverse of A/B
    assert paired_ratio([5.0], [4.0]).low is None  # one pair: no interval


def test_pairing_removes_what_both_share() -> None:
    """A drift that moves both cells of a round alike leaves their ratio alone."""
    drift = [1.0, 0.7, 1.3, 0.9, 1.1]
    r = paired_ratio([80 * d for d in drift], [100 * d for d in drift])
    assert r.mean == pytest.approx(0.8) and r.high == pytest.approx(0.8)


def test_stein_rounds_against_hand_computed_values() -> None:
    # pilot sd 0.05 over 5 values: t(4, 0.975) = 2.7764; (2.7764 * 0.05 / 0.03)^2 = 21.4
    pilot = [0.0, 0.05, -0.05, 0.05, -0.05]
    s = math.sqrt(sum(x * x for x in pilot) / 4)
    assert stein_rounds(pilot, 0.03) == math.ceil((2.776445 * s / 0.03) ** 2)
    assert stein_rounds([0.01, 0.011, 0.009], 0.03) == 3  # tight pilot: no more needed
    with pytest.raises(ValueError):
        stein_rounds([0.1], 0.03)


def test_trend_finds_a_drift_and_not_noise() -> None:
    rising = trend([100, 104, 108, 112, 116, 120])
    assert rising is not None and rising.significant
    assert rising.per_step_rel == pytest.approx(4 / 110)
    flat = trend([100, 103, 99, 101, 98, 102])
    assert flat is not None and not flat.significant
    assert trend([1.0, 2.0]) is None


def test_every_round_holds_each_cell_once_in_the_seeded_order() -> None:
    orders = [round_order(7, "g", k, [0, 1, 2, 3]) for k in range(1, 21)]
    assert all(sorted(o) == [0, 1, 2, 3] for o in orders)
    assert len({tuple(o) for o in orders}) > 5  # shuffled, not one fixed order
    assert orders == [round_order(7, "g", k, [3, 2, 1, 0]) for k in range(1, 21)]
    assert orders != [round_order(8, "g", k, [0, 1, 2, 3]) for k in range(1, 21)]


def _rounds(values: dict[int, dict[int, float]], *, base: dict[int, int | None],
            repeats_min: int = 3, repeats_max: int = 40) -> Rounds:
    members = [Member(i, f"cell{i}", base[i], dict(v)) for i, v in values.items()]
    return Rounds(members, seed=1, group="g", repeats_min=repeats_min,
                  repeats_max=repeats_max, ci_target=0.03, confidence=0.95)


def _simulate(noise: float, drift_per_round: float, seed: int = 3) -> int:
    """Rounds run until the scheduler stops, for a cell at 0.8 of its baseline whose
    repeats carry ``noise`` of their own and a drift that is not shared between them
    (the cell measured at another moment than its baseline)."""
    rng = random.Random(seed)
    rounds = _rounds({0: {}, 1: {}}, base={0: None, 1: 0})
    while (step := rounds.next_round()) is not None:
        k, order = step
        for idx in order:
            level = 100.0 if idx == 0 else 80.0
            shift = 1 + drift_per_round * k * (1 if idx == 1 else -1)
            rounds.members[idx].values[k] = level * shift * (1 + rng.gauss(0, noise))
    return rounds.done_rounds


def test_a_stable_comparison_stops_sooner_than_a_drifting_one() -> None:
    stable = _simulate(noise=0.01, drift_per_round=0.0)
    drifting = _simulate(noise=0.01, drift_per_round=0.02)
    assert 3 <= stable < drifting


def test_only_cells_still_needed_run_and_baselines_stay_with_them() -> None:
    # cell 1 vs 0 agrees tightly (done after the pilot); cell 2 vs 0 is noisy
    tight = {k: 100.0 for k in range(1, 4)}
    rounds = _rounds({0: tight, 1: {k: 80.0 + 0.1 * k for k in range(1, 4)},
                      2: {1: 50.0, 2: 70.0, 3: 40.0}}, base={0: None, 1: 0, 2: 0})
    step = rounds.next_round()
    assert step is not None and step[0] == 4
    assert sorted(step[1]) == [0, 2]  # 1 is done; 0 stays as 2's baseline
    assert rounds.stop_reason(rounds.members[1], budget_spent=False) == "ci"
    assert rounds.stop_reason(rounds.members[0], budget_spent=False) == "max"


def test_a_round_cut_short_is_finished_first() -> None:
    """Resumed after a kill mid-round: the cells missing from it run, in its order."""
    full = {k: 100.0 for k in (1, 2)}
    rounds = _rounds({0: full, 1: dict(full), 2: {1: 90.0}}, base={0: None, 1: 0, 2: 0})
    step = rounds.next_round()
    assert step == (2, [2])
    order = round_order(1, "g", 3, [0, 1, 2])
    rounds.members[2].values[2] = 90.0
    step = rounds.next_round()
    assert step is not None and step[0] == 3 and step[1] == order


def test_baselines_follow_the_rules_in_order() -> None:
    seed_cells: list[tuple[int, dict[str, object]]] = [
        (0, {"standbys": 2, "batch": 1, "synchronous_commit": "off"}),
        (1, {"standbys": 2, "batch": 1, "synchronous_commit": "local"}),
        (2, {"standbys": 2, "batch": 1, "synchronous_commit": "on"}),
        (3, {"standbys": 2, "batch": 10, "synchronous_commit": "on"}),
        (4, {"standbys": 0, "batch": 1, "synchronous_commit": "off"}),
        (5, {"standbys": 0, "batch": 1, "synchronous_commit": "on"}),
    ]
    rules: list[dict[str, object]] = [{"synchronous_commit": "local"},
                                      {"synchronous_commit": "off"}, {"batch": 1}]
    assert baselines(seed_cells, rules) == {0: 1, 1: None, 2: 1, 3: 2, 4: None, 5: 4}


def test_a_widening_interval_is_said_and_a_narrowing_one_is_not() -> None:
    rng = random.Random(3)
    steady = {k: 100.0 for k in range(1, 9)}
    calm = {k: 80.0 * (1 + rng.gauss(0, 0.02)) for k in range(1, 9)}
    # the pilot's three rounds agree; later rounds swing ever wider
    wild = {1: 80.0, 2: 80.5, 3: 79.5, 4: 95.0, 5: 65.0, 6: 100.0, 7: 60.0, 8: 105.0}
    rounds = _rounds({0: steady, 1: calm, 2: wild}, base={0: None, 1: 0, 2: 0})
    assert rounds.not_narrowing(rounds.members[1]) is None
    line = rounds.not_narrowing(rounds.members[2])
    assert line is not None and "did not narrow" in line and "after 8" in line
    assert rounds.not_narrowing(rounds.members[0]) is None  # a baseline has no interval


def test_a_unit_s_rounds_are_numbered_from_its_base() -> None:
    rounds = Rounds([Member(0, "a", None, {}), Member(1, "b", 0, {})], seed=1, group="g",
                    repeats_min=2, repeats_max=3, ci_target=0.03, confidence=0.95,
                    base=20_000)
    step = rounds.next_round()
    assert step is not None and step[0] == 20_001
    for r in (20_001, 20_002, 20_003):
        rounds.members[0].values[r] = 100.0
        rounds.members[1].values[r] = 50.0 + r % 7
    assert rounds.done_rounds == 3 and rounds.next_round() is None  # repeats_max, from base


def test_the_round_line_says_the_pilot_runs_until_it_is_complete() -> None:
    """After round 2 of a 5-round pilot an interval from two rounds (t = 12.7) would
    read hundreds of per cent wide: the line says the pilot runs instead."""
    rounds = _rounds({0: {}, 1: {}}, base={0: None, 1: 0}, repeats_min=5)
    lines = []
    for k, (a, b) in enumerate([(100.0, 60.0), (101.0, 90.0), (99.0, 80.0), (100.0, 79.0),
                                (100.5, 80.5)], start=1):
        rounds.members[0].values[k], rounds.members[1].values[k] = a, b
        lines.append(rounds.progress_line(k, 30.0))
    for k, line in enumerate(lines[:4], start=1):
        assert line == (f"round {k}: pilot round {k} of 5, no interval before the pilot is "
                        "complete; 2 cells go on")
        assert "±" not in line and "%" not in line
    assert lines[4] is not None
    assert lines[4].startswith("round 5: widest interval ±")
    assert "(cell1 / cell0; target ±3 %); 2 cells go on, " in lines[4]
    assert "more round" in lines[4] and "ETA" in lines[4]
    done = _rounds({0: {1: 100.0, 2: 100.0}}, base={0: None}, repeats_min=2, repeats_max=2)
    assert done.progress_line(2, 30.0) == ("round 2: widest interval ±0.0 % (cell0; "
                                           "target ±3 %); done")


# --- a duet's crossover of two rounds ----------------------------------------------------


def _duet(effect: float, cpus: float, units: int, noise: float = 0.0, seed: int = 5
          ) -> tuple[dict[int, float], dict[int, float]]:
    """A duet's rows/s by round: the cell at ``effect`` times its baseline, the side on
    the better CPU set ``cpus`` times faster, the sets swapped every round (the cell on
    the better one in odd rounds, run/duet.Sides), each repeat with ``noise`` of its
    own and both with a drift they share."""
    rng = random.Random(seed)
    cell, base = {}, {}
    for r in range(1, 2 * units + 1):
        shared = rng.uniform(0.6, 1.4)
        better = r % 2 == 1
        cell[r] = 1000 * effect * shared * (cpus if better else 1) * rng.gauss(1, noise)
        base[r] = 1000 * shared * (1 if better else cpus) * rng.gauss(1, noise)
    return cell, base


def test_the_crossover_cancels_a_steady_difference_between_the_cpu_sets() -> None:
    """A set 1.6 times the other (what CPU 1 ran against CPU 0 in a loaded A/A here): a
    round's ratio carries it one way or the other, a unit's of two rounds does not."""
    cell, base = _duet(1.03, 1.6, units=5)
    rounds = paired(cell, base, 0.95)
    unit = paired(cell, base, 0.95, crossover=True)
    assert rounds is not None and unit is not None and rounds.low is not None
    assert (rounds.rounds, unit.rounds) == (10, 5)
    assert unit.mean == pytest.approx(1.03) and unit.high == pytest.approx(1.03)
    assert rounds.mean == pytest.approx(1.03)  # the swap leaves the mean unbiased ...
    assert rounds.low < 0.8  # ... but not the spread
    # each unit's log ratio is the mean of its two rounds' log ratios
    a, b = crossover_units(cell, base)
    assert math.log(a[0] / b[0]) == pytest.approx(
        (math.log(cell[1] / base[1]) + math.log(cell[2] / base[2])) / 2)


def test_an_odd_last_round_is_left_out_of_the_crossover_and_counted() -> None:
    cell, base = _duet(1.0, 1.3, units=3, noise=0.02)
    cell[7], base[7] = 900.0, 1000.0  # a unit begun, not finished
    del cell[4]  # a side that missed a round: its unit is not whole
    assert unpaired_rounds(cell, base) == 2
    unit = paired(cell, base, 0.95, crossover=True)
    assert unit is not None and unit.rounds == 2
    found = ratio_of(list(cell.items()), list(base.items()), 0.95, crossover=True)
    assert found is not None and (found["units"], found["rounds"]) == (2, 4)
    assert ratio_of([(1, 1.0), (2, 1.0)], [(1, 1.0), (2, 2.0)], crossover=True) == \
        ratio_of([(1, 1.0), (2, 1.0)], [(1, 1.0), (2, 2.0)])  # one unit: by round


def test_a_duets_stop_rule_counts_crossover_units_and_runs_them_whole() -> None:
    """Stein's rule on the units' log ratios: the pilot is repeats_min units, and the
    rounds go two by two (a unit's second round always follows its first), so the
    rounds stop at an even count; repeats_max counts units."""
    rng = random.Random(2)
    for noise, most in ((0.001, 2), (0.5, 3)):
        rounds = Rounds([Member(0, "stock", None), Member(1, "patched", 0)], seed=1,
                        group="g", repeats_min=2, repeats_max=most, ci_target=0.02,
                        confidence=0.95, crossover=True)
        seen = []
        while (step := rounds.next_round()) is not None:
            round_no, order = step
            seen.append(round_no)
            assert sorted(order) == [0, 1]  # a pair: both sides every round
            better = round_no % 2 == 1
            rounds.members[0].values[round_no] = 1000 * (1 if better else 1.6)
            rounds.members[1].values[round_no] = (1000 * (1.6 if better else 1)
                                                  * math.exp(rng.gauss(0, noise)))
        assert seen == list(range(1, 2 * most + 1)), (noise, seen)
        assert rounds.stop_reason(rounds.members[1], budget_spent=False) == \
            ("ci" if noise < 0.01 else "max")
    # a unit begun when the rule is already met is finished first
    rounds = Rounds([Member(0, "stock", None, {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0}),
                     Member(1, "patched", 0, {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0})],
                    seed=1, group="g", repeats_min=2, repeats_max=10, ci_target=0.02,
                    confidence=0.95, crossover=True)
    assert rounds.satisfied(rounds.members[1])
    step = rounds.next_round()
    assert step is not None and step[0] == 6 and sorted(step[1]) == [0, 1]
