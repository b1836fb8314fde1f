"""The frontier's verdict (seqbench.protocol.verdict) on hand-made run records, every expectation computed by hand.

t(0.975, 2) = 4.302653, so three seeds with sd s give the interval mean ± 4.302653 s / sqrt(3)
= mean ± 2.484138 s.
"""

from __future__ import annotations

import math

import pytest

from seqbench.reports import frontier
from seqbench.protocol import verdict
from seqbench.training.record import Run

HALF_3 = 4.302653 / math.sqrt(3)  # t-interval half-width per unit sd, three seeds


def _run(family, params, budget, val, test=None, curve=None, seed=1):
    """A completed run: best validation loss `val`, test loss `test`; `curve` is [(flops, val loss)]
    (default: one validation at the budget)."""
    metrics = {"status": "completed", "params_non_embedding": params, "budget/flops": budget,
               "val/loss_best": val, "seed": seed}
    if test is not None:
        metrics["test/loss"] = test
    rows = [{"train/flops": f, "val/loss": v, "val/ppl": math.exp(v), "curve/train_time_s": f / 1e9}
            for f, v in (curve or [(budget, val)])]
    return Run(f"{family}-{params}-{budget}-{seed}", family, metrics, rows)


def _seeds(family, params, budget, vals, tests=None, **kw):
    return [_run(family, params, budget, v, None if tests is None else t, seed=i, **kw)
            for i, (v, t) in enumerate(zip(vals, tests or vals))]


def test_t_interval_by_hand():
    i = verdict.t_interval([1.70, 1.72, 1.74])
    assert i.mean == pytest.approx(1.72) and i.sd == pytest.approx(0.02)
    assert (i.low, i.high) == (pytest.approx(1.72 - 0.02 * HALF_3, abs=1e-6), pytest.approx(1.72 + 0.02 * HALF_3, abs=1e-6))
    one = verdict.t_interval([1.5])
    assert one.sd is None and one.low == -math.inf and one.high == math.inf


def test_a_winner_is_called_only_outside_the_intervals():
    # lstm [1.6703, 1.7697] lies below gpt [1.8503, 1.9697]: lstm wins
    runs = _seeds("lstm", 1000, 1e12, [1.70, 1.72, 1.74]) + _seeds("gpt", 1000, 1e12, [1.90, 1.92, 1.94])
    v = verdict.verdict(verdict.cells(runs), 1e12)
    assert v.winner == "lstm" and v.tied == ["lstm"]
    # gpt's seeds spread: mean 1.7667, sd 0.15275, interval [1.3872, 2.1461] overlaps lstm's: tie
    runs = _seeds("lstm", 1000, 1e12, [1.70, 1.72, 1.74]) + _seeds("gpt", 1000, 1e12, [1.60, 1.80, 1.90])
    v = verdict.verdict(verdict.cells(runs), 1e12)
    assert v.winner is None and sorted(v.tied) == ["gpt", "lstm"]
    assert v.entries["gpt"].interval.low == pytest.approx(1.766667 - 0.152753 * HALF_3, abs=1e-5)


def test_one_seed_never_wins():
    runs = _seeds("lstm", 1000, 1e12, [1.0]) + _seeds("gpt", 1000, 1e12, [3.0, 3.01, 3.02])
    v = verdict.verdict(verdict.cells(runs), 1e12)
    assert v.winner is None and sorted(v.tied) == ["gpt", "lstm"]


def test_the_old_minimum_over_points_and_the_seed_means_disagree():
    """At 1e12: the envelope takes gpt's single 1e13 run at its 1e12 validation (1.50, one seed) and
    calls gpt; the verdict reads the cells trained to 1e12 and calls lstm (intervals apart). And where
    gpt's 1e12 seeds spread, the envelope still names lstm (mean 1.72 < 1.767) while the verdict says tie."""
    lstm = _seeds("lstm", 1000, 1e12, [1.70, 1.72, 1.74])
    lucky = [_run("gpt", 1000, 1e13, 1.40, curve=[(1e12, 1.50), (1e13, 1.40)])]
    runs = lstm + _seeds("gpt", 1000, 1e12, [1.90, 1.92, 1.94]) + lucky
    _, rows, _ = frontier.table(frontier.configs(runs), budgets=[1e12])
    assert rows[0][2] == "gpt"                                     # the old rule
    assert verdict.verdict(verdict.cells(runs), 1e12).winner == "lstm"  # the new one

    runs = lstm + _seeds("gpt", 1000, 1e12, [1.60, 1.80, 1.90])
    _, rows, _ = frontier.table(frontier.configs(runs), budgets=[1e12])
    assert rows[0][2] == "lstm"
    v = verdict.verdict(verdict.cells(runs), 1e12)
    assert v.winner is None and sorted(v.tied) == ["gpt", "lstm"]


def test_sizes_are_chosen_on_validation_and_scored_on_test():
    # lstm's small size is better on validation (1.70 vs 1.75) and worse on test (1.90 vs 1.60): the
    # verdict reports the small one's test 1.90, which loses to gpt's 1.80 (intervals apart)
    runs = (_seeds("lstm", 1000, 1e12, [1.69, 1.70, 1.71], [1.89, 1.90, 1.91])
            + _seeds("lstm", 9000, 1e12, [1.74, 1.75, 1.76], [1.59, 1.60, 1.61])
            + _seeds("gpt", 1000, 1e12, [1.85, 1.85, 1.85], [1.79, 1.80, 1.81]))
    v = verdict.verdict(verdict.cells(runs), 1e12)
    assert v.entries["lstm"].params == 1000
    assert v.entries["lstm"].interval.mean == pytest.approx(1.90)
    assert v.winner == "gpt"



def test_the_cell_that_got_the_further_seeds_is_the_family_s_entry():
    # bug caught: a size run once (1.58) beside the chosen size's three seeds (mean 1.59) taken for its
    # lower loss: one seed, no interval, and the verdict a tie where lstm [1.4703, 1.5697] lies below
    # gpt [1.6852, 1.7348]
    runs = (_seeds("lstm", 1000, 1e12, [1.58])
            + _seeds("lstm", 9000, 1e12, [1.55, 1.60, 1.62], [1.50, 1.52, 1.54])
            + _seeds("gpt", 1000, 1e12, [1.70, 1.71, 1.72]))
    v = verdict.verdict(verdict.cells(runs), 1e12)
    assert (v.entries["lstm"].params, v.entries["lstm"].interval.n) == (9000, 3)
    assert v.winner == "lstm"

def test_the_report_puts_the_verdict_table_first(tmp_path):
    from seqbench.reports import report

    runs = _seeds("lstm", 1000, 1e12, [1.70, 1.72, 1.74]) + _seeds("gpt", 1000, 1e12, [1.60, 1.80, 1.90])
    result = report.write_report(runs, tmp_path / "out")
    text = result["frontier"]["verdict_table"]
    assert "tie (lstm, gpt)" in text
    assert f"1.720 ± 0.020 [{1.72 - 0.02 * HALF_3:.3f}, {1.72 + 0.02 * HALF_3:.3f}] (0.001M, n=3, no test)" in text
    page = (tmp_path / "out" / "report.md").read_text()
    assert page.index("### Verdict") < page.index("### Lower envelope")


def test_runs_at_two_tuned_settings_are_two_cells_never_seeds_of_one():
    # bug caught: the cell keyed by (family, size, budget) alone, so a tier's final runs at the setting
    # the transfer check chose pooled with the one run at the tuned setting it superseded: a "seed" of
    # another configuration in the mean and the interval, and the table's row mixing the two
    new = [_run("lstm", 1000, 1e13, v, seed=s) for s, v in ((1, 5.0), (2, 5.1), (3, 5.2))]
    old = _run("lstm", 1000, 1e13, 6.0, seed=1)
    for r in new:
        r.metrics.update({"tune/lr_scale": 2.0, "tune/tokens_per_step": 1013})
    old.metrics.update({"tune/lr_scale": 2.0, "tune/tokens_per_step": 501})
    cs = verdict.cells([old, *new])
    assert sorted(len(c.selection) for c in cs) == [1, 3]
    (entry,) = verdict.verdict(cs, 1e13).entries.values()
    assert entry.interval.mean == pytest.approx(5.1)  # the chosen setting's seeds, not 5.325 over four runs
    from seqbench.reports.report import configurations
    assert sorted(configurations([old, *new])) == ["lstm 0.001M @ 1e+13 (lr x 2, 1013 tok)", "lstm 0.001M @ 1e+13 (lr x 2, 501 tok)"]
    assert sorted(c.label for c in frontier.configs([old, *new])) == ["lstm 0.001M @ 1e+13 (lr x 2, 1013 tok)",
                                                                      "lstm 0.001M @ 1e+13 (lr x 2, 501 tok)"]


def test_the_rule_reads_a_score_where_higher_is_better():
    # BLEU: 36 ± tiny above 30 ± tiny; read as a loss the lower mean (30) would win
    intervals = {"a": verdict.t_interval([36.0, 36.05]), "b": verdict.t_interval([30.0, 30.05])}
    assert verdict.winner_or_tie(intervals, higher_is_better=True) == ("a", ["a"])
    assert verdict.winner_or_tie(intervals) == ("b", ["b"])
    assert verdict.winner_or_tie({"a": verdict.t_interval([36.0])}) == (None, ["a"])  # alone: no one to beat
