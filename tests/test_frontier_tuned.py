"""The frontier after tuning (seqbench.reports.frontier_tuned): the old records' tiers, the final cells' setting
filter, and the before/after difference, on hand-made records with every expectation computed by hand."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from seqbench.reports import frontier_tuned as ft
from seqbench.reports import frontier_untuned as fu
from seqbench.reports import tuning_effect as te
from seqbench.training.record import Run

REPO = Path(__file__).resolve().parents[1]
FIGURES = REPO / "experiments" / "figures"
COLUMNS = ["run", "family", "status", "params", "params_non_embedding", "best_val_ppl", "test_ppl",
           "tokens_per_s", "train_time_to_target_s", "wall_time_s", "peak_mem_mb"]


def _record(tmp_path: Path, rows: list[tuple]) -> Path:
    """runs.csv with rows (run, family, non-embedding params, val loss, test loss, wall time)."""
    path = tmp_path / "runs.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for run, family, params, val, test, wall in rows:
            w.writerow([run, family, "completed", params, params, math.exp(val), math.exp(test), 1, 1, wall, 1])
    return path


def test_an_old_record_gives_each_run_the_tier_of_its_place_in_the_sweep(tmp_path):
    # frontier_ptb_s1234 swept family x size x (1e12, 3e12, 1e13), the tier fastest: job 4 is the second
    # family's first size at 3e12. A reader that took the tier as job // 3 would give job 4 the tier 3e12 too,
    # but job 1 (first family, 3e12) 1e12.
    rows = [(f"frontier_ptb_s1234/{j}", "lstm" if j < 3 else "gru", 100 if j < 3 else 200,
             5.0 - 0.1 * j, 5.1 - 0.1 * j, 10.0 * (1 + j % 3)) for j in range(6)]
    runs = {r.name: r for r in fu.before_runs(_record(tmp_path, rows))}
    assert [runs[f"frontier_ptb_s1234/{j}"].metrics["budget/flops"] for j in range(6)] == [1e12, 3e12, 1e13] * 2
    assert runs["frontier_ptb_s1234/4"].family == "gru" and runs["frontier_ptb_s1234/4"].metrics["seed"] == 1234
    assert runs["frontier_ptb_s1234/4"].metrics["test/loss"] == pytest.approx(5.1 - 0.4)
    assert runs["frontier_ptb_s1234/4"].metrics["val/loss_best"] == pytest.approx(5.0 - 0.4)


def test_a_record_whose_blocks_are_not_one_family_at_one_size_stops(tmp_path):
    # sizes fastest (s, m, l at one tier): a block of three holds three sizes
    rows = [(f"frontier_ptb_s1234/{j}", "lstm", 100 * (1 + j % 3), 5.0, 5.0, 10.0 * (1 + j)) for j in range(3)]
    with pytest.raises(fu.LayoutError, match="not one family at one size"):
        fu.before_runs(_record(tmp_path, rows))


def test_a_record_whose_wall_time_falls_with_the_tier_stops(tmp_path):
    rows = [(f"frontier_ptb_s1234/{j}", "lstm", 100, 5.0, 5.0, 30.0 - 10 * j) for j in range(3)]
    with pytest.raises(fu.LayoutError, match="do not grow"):
        fu.before_runs(_record(tmp_path, rows))


def test_a_sweep_without_a_layout_stops(tmp_path):
    with pytest.raises(fu.LayoutError, match="no layout"):
        fu.before_runs(_record(tmp_path, [("someone_elses_sweep/0", "lstm", 100, 5.0, 5.0, 1.0)]))


@pytest.mark.parametrize("name", ["frontier-ptb", "frontier-shakespeare", "frontier-ptb-parallel",
                                  "frontier-shakespeare-parallel"])
def test_every_committed_untuned_record_fits_its_layout(name):
    runs = fu.before_runs(FIGURES / name / "runs.csv")
    with open(FIGURES / name / "runs.csv") as f:
        assert len(runs) == sum(1 for _ in f) - 1


@pytest.mark.parametrize("name", ["frontier-ptb-parallel", "frontier-shakespeare-parallel"])
def test_the_rebuilt_tiers_reproduce_the_verdict_table_the_record_was_written_with(name):
    # these reports were made when runs recorded their budget: their verdict rows are the tiers' ground truth
    from seqbench.protocol.verdict import cells, table

    text, _ = table(cells(fu.before_runs(FIGURES / name / "runs.csv")))
    report = (FIGURES / name / "report.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| 1")]
    assert rows and all(row in report for row in rows)


def test_a_failed_run_in_an_old_record_neither_breaks_the_tier_check_nor_becomes_a_cell(tmp_path):
    # the report writes a failed job with empty perplexities and the short time it ran
    path = _record(tmp_path, [(f"frontier_ptb_s1234/{j}", "lstm", 100, 5.0, 5.0, 10.0 * (1 + j)) for j in range(3)])
    lines = path.read_text().splitlines()
    cols = lines[2].split(",")
    cols[2], cols[5], cols[6], cols[9] = "failed", "", "", "0.5"
    lines[2] = ",".join(cols)
    path.write_text("\n".join(lines) + "\n")
    from seqbench.protocol.verdict import cells

    runs = fu.before_runs(path)
    assert runs[1].failed and runs[1].metrics["test/loss"] is None
    assert sorted(c.budget for c in cells(runs)) == [1e12, 1e13]


def test_the_committed_records_give_the_untuned_verdict_the_protocol_page_quotes():
    # experiments/tuning-protocol.md, "The verdict rule on the recorded, untuned runs", read by hand from
    # the same records before this module existed: Tiny Shakespeare at 1e11, Transformer 2.554 ± 0.004 and
    # LSTM 3.344 ± 0.001; PTB at 1e12, LSTM 6.119 and GPT 6.545 ± 0.002
    from seqbench.protocol.verdict import cells, verdict

    sh = verdict(cells(fu.before_runs(FIGURES / "frontier-shakespeare" / "runs.csv")), 1e11).entries
    assert sh["transformer"].interval.mean == pytest.approx(2.554, abs=5e-4)
    assert sh["transformer"].interval.sd == pytest.approx(0.004, abs=5e-4)
    assert sh["lstm"].interval.mean == pytest.approx(3.344, abs=5e-4)
    ptb = verdict(cells(fu.before_runs(FIGURES / "frontier-ptb" / "runs.csv")), 1e12).entries
    assert ptb["lstm"].interval.mean == pytest.approx(6.119, abs=5e-4)
    assert ptb["gpt"].interval.mean == pytest.approx(6.545, abs=5e-4)


def _final(family, budget, lr, tokens, val, test, seed=1234, params=100):
    return Run(f"{family}-{budget}-{lr}-{tokens}-{seed}", family,
               {"status": "completed", "budget/flops": budget, "tune/lr_scale": lr, "tune/tokens_per_step": tokens,
                "val/loss_best": val, "test/loss": test, "params_non_embedding": params, "seed": seed})


def test_a_final_run_at_a_setting_the_transfer_check_rejected_is_set_aside():
    # LSTM tuned at lr x2, 256 tokens; the check moved it at 1e13 to lr x4, 512. Its 1e13 run at the tuned
    # setting (the rejected one, the lowest loss here) must not stand for it; its 1e12 run at the tuned one
    # does; at 1e14, beyond the highest tier 1e13, the family trains with the 1e13 setting (Chain.top).
    tuned = {"lstm": {"lr_scale": 2.0, "tokens_per_step": 256}}
    moved = {("lstm", 1e13): {"lr_scale": 4.0, "tokens_per_step": 512}}
    runs = [_final("lstm", 1e12, 2.0, 256, 2.0, 2.1), _final("lstm", 1e13, 2.0, 256, 1.0, 1.0),
            _final("lstm", 1e13, 4.0, 512, 1.5, 1.6), _final("lstm", 1e14, 4.0, 512, 1.2, 1.3),
            _final("lstm", 1e14, 2.0, 256, 1.1, 1.1), _final("hmm", 1e13, 1.0, 35, 5.0, 5.0)]
    runs.append(Run("failed", "lstm", {"status": "failed", "budget/flops": 1e12}))  # no cell: left out
    kept = {(r.family, r.metrics["budget/flops"], r.metrics["tune/lr_scale"])
            for r in ft.at_their_setting(runs, tuned, moved, highest=1e13)}
    assert kept == {("lstm", 1e12, 2.0), ("lstm", 1e13, 4.0), ("lstm", 1e14, 4.0), ("hmm", 1e13, 1.0)}


def test_a_run_stopped_by_a_signal_or_training_now_is_counted_unfinished_not_failed():
    # the chain's 1e14 run SIGTERMed when both cores went elsewhere, resumed later: the verdict's line said
    # "1 failed" of a run that was training
    runs = [_final("lstm", 1e12, 2.0, 256, 2.0, 2.1), _final("lstm", 1e13, 4.0, 512, 1.5, 1.6),
            Run("stopped", "rnn", {"status": "stopped", "error": "SIGTERMException: ", "budget/flops": 1e14}),
            Run("running", "gru", {"status": "running", "budget/flops": 1e14}),
            Run("failed", "gpt", {"status": "failed", "error": "ValueError: x", "budget/flops": 1e14})]
    assert [r.unfinished for r in runs] == [False, False, True, True, False]
    assert all(r.failed for r in runs[2:])  # none completed: no cell reads them
    assert ft.outcomes(runs, kept=runs[:1]) == (1, 1, 2)  # set aside, failed, unfinished


def test_the_whole_split_score_of_a_final_run_is_the_mean_of_its_two_halves():
    # a reader that kept the score half alone would compare the second half (harder text, 1.9) with the
    # old runs' whole split
    whole = te.on_whole_split(_final("lstm", 1e12, 1.0, 256, 1.7, 1.9))
    assert whole.metrics["test/loss"] == pytest.approx(1.8)
    assert whole.metrics["val/loss_best"] == 1.7  # selection unchanged
    untested = _final("lstm", 1e12, 1.0, 256, None, 1.9)  # a run whose best validation was null: no whole score
    assert te.on_whole_split(untested).metrics["test/loss"] is None


def test_the_difference_and_its_welch_interval_by_hand():
    before = [Run(f"b{i}", "gru", {"status": "completed", "budget/flops": 1e12, "params_non_embedding": 100,
                                   "val/loss_best": v, "test/loss": v}) for i, v in enumerate([2.0, 2.2])]
    after = [_final("gru", 1e12, 1.0, 256, v, v, seed=i) for i, v in enumerate([1.7, 1.8, 1.9])]
    (change,) = te.changes(before, after)
    assert change.difference == pytest.approx(1.8 - 2.1)
    # Welch: se^2 = 0.01/3 + 0.02/2; df = se^4 / ((0.01/3)^2/2 + (0.02/2)^2/1)
    v1, v2 = 0.01 / 3, 0.02 / 2
    se, df = math.sqrt(v1 + v2), (v1 + v2) ** 2 / (v1 ** 2 / 2 + v2 ** 2 / 1)
    from scipy import stats
    half = stats.t.ppf(0.975, df) * se
    assert change.interval == (pytest.approx(-0.3 - half), pytest.approx(-0.3 + half))
    assert change.call == "within the seeds' noise"  # half ≈ 0.60: two seeds of sd 0.14 show little


def test_a_difference_with_one_seed_on_a_side_has_no_interval_and_says_so():
    before = [Run("b", "gru", {"status": "completed", "budget/flops": 1e12, "params_non_embedding": 100,
                               "val/loss_best": 2.0, "test/loss": 2.0})]
    after = [_final("gru", 1e12, 1.0, 256, v, v, seed=i) for i, v in enumerate([1.7, 1.71, 1.72])]
    (change,) = te.changes(before, after)
    assert change.interval is None and change.call == "no interval (1 seed)"


def test_a_clear_gain_is_called_better():
    before = [Run(f"b{i}", "gru", {"status": "completed", "budget/flops": 1e12, "params_non_embedding": 100,
                                   "val/loss_best": v, "test/loss": v}) for i, v in enumerate([2.00, 2.01, 2.02])]
    after = [_final("gru", 1e12, 1.0, 256, v, v, seed=i) for i, v in enumerate([1.70, 1.71, 1.72])]
    (change,) = te.changes(before, after)
    assert change.call == "better" and change.interval[1] < 0


def test_what_the_final_cells_lack_is_said_per_tier():
    # a family with no run at a tier, and one with two of its three sizes: its cell is chosen among two
    def run(family, budget, size):
        return Run(f"{family}-{budget}-{size}", family, {"status": "completed", "budget/flops": budget,
                                                         "overrides": f"size={size}"})

    runs = [run("lstm", 1e12, s) for s in "sml"] + [run("gpt", 1e12, s) for s in "sml"]
    runs += [run("lstm", 1e13, "s"), run("lstm", 1e13, "m")]
    text = ft.missing(runs, ["lstm", "gpt"], ["s", "m", "l"], [1e12, 1e13])
    assert text == "Not run yet: at 1e13: no run yet for gpt; lstm 2 of 3 sizes."
    assert ft.missing(runs[:6], ["lstm", "gpt"], ["s", "m", "l"], [1e12]).startswith("Every family")


def test_the_tier_beyond_is_complete_at_its_planned_seeds_where_they_are_fewer(monkeypatch):
    # bug caught: a tier beyond the frontier that plans fewer seeds (it planned two until 2026-12-06) counted
    # against three, so the record (and the findings that read it) would stay "partial" after every run
    monkeypatch.setattr("seqbench.protocol.final_cells.TOP_SEEDS", 2)
    runs = [_final("lstm", 1e13, 1.0, 256, 1.5, 1.5 + s / 100, seed=s) for s in (1, 2)]
    runs += [_final("lstm", 1e14, 1.0, 256, 1.3, 1.3 + s / 100, seed=s) for s in (1, 2)]
    from seqbench.protocol.verdict import cells

    rows = {r["budget"]: r for r in ft.verdict_rows(cells(runs), [1e12, 1e13])}
    assert (rows["1e+13"]["seeds"], rows["1e+13"]["seeds_planned"]) == (2, 3)
    assert (rows["1e+14"]["seeds"], rows["1e+14"]["seeds_planned"]) == (2, 2)
    assert ft.seed_count(runs, [1e12, 1e13]).startswith("1 of the 2 cells the verdict reads have their 3 seeds")
    assert ft.seed_count(runs[:2], [1e12, 1e13]) == "0 of the 1 cells the verdict reads have 3 seeds or more"


def test_the_tier_beyond_plans_the_frontier_s_three_seeds():
    # bug caught: the tier beyond planned at two seeds, whose 95 % t-interval (±9 sd) no gap could pass
    from seqbench.protocol.final_cells import SEEDS, planned_seeds

    assert planned_seeds(1e14, [1e11, 1e12, 1e13]) == planned_seeds(1e13, [1e11, 1e12, 1e13]) == SEEDS == 3


def test_the_tier_beyond_is_not_read_as_lacking_the_sizes_or_seeds_it_never_trains(monkeypatch):
    # bug caught: the tier beyond counted as a frontier tier, so the record said "at 1e14: lstm 1 of 3 sizes"
    # for good, though that tier trains its families at their chosen size alone, two seeds each where it plans
    # two (Chain.top; the protocol's until 2026-12-06)
    monkeypatch.setattr("seqbench.protocol.final_cells.TOP_SEEDS", 2)
    from seqbench.protocol.final_cells import Experiment

    experiment = Experiment("tune_frontier")

    def run(family, tier, size, seed):
        r = _final(family, tier, 1.0, 256, 2.0, 2.0 + seed / 1000, seed=seed, params=experiment.sizes.index(size) + 1)
        r.metrics["tune/size"] = size
        return r

    # the frontier complete: every size once (seed 1234), seeds 2 and 3 of size m
    runs = [run(f, t, size, 1234) for f in experiment.presets for t in experiment.tiers() for size in experiment.sizes]
    runs += [run(f, t, "m", seed) for f in experiment.presets for t in experiment.tiers() for seed in (2, 3)]
    runs += [run("lstm", 1e14, "l", seed) for seed in (1234, 2)]  # the tier beyond: one size, two seeds
    cells = len(experiment.presets) * len(experiment.tiers()) + 1
    assert ft.coverage(runs, experiment) == (
        f"{cells} of the {cells} cells the verdict reads have their 3 seeds or more (2 at the tier beyond the "
        "frontier). Every family has run every size at every tier of the frontier.")


def test_the_verdict_record_keeps_enough_decimals_that_a_reader_rounds_once():
    # bug caught: verdict.csv wrote 4 decimals, so a mean of 1.63351 became "1.6335", which the findings page
    # rounded again to 1.633 while the verdict table beside it (from the runs) showed 1.634 (seen 2026-12-06
    # on the GRU at 1e14)
    from seqbench.protocol.verdict import cells

    runs = [_final("gru", 1e13, 1.0, 256, 1.6, score, seed=s) for s, score in ((1234, 1.63341), (2, 1.63361))]
    row = ft.verdict_rows(cells(runs), [1e13])[0]
    assert f"{float(row['score_mean']):.3f}" == f"{(1.63341 + 1.63361) / 2:.3f}" == "1.634"


def test_the_tier_beyond_is_listed_run_by_run_with_its_wall_time_over_every_segment():
    # bugs caught: a run of the frontier's tiers listed as beyond them; a resumed run given its last
    # process's wall time (the 1e14 GPT's seed 2: 268 s for 2,716 s), or not marked as the lower bound it is;
    # the families out of the registry's order; seeds in the order the sweeps were read (seed10 before seed2)
    def final(family, budget, seed, wall, fit_wall):
        r = _final(family, budget, 1.0, 256, 1.4, 1.5, seed=seed)
        r.metrics |= {"overrides": f"preset=x budget.flops={budget:g} seed={seed}", "wall_time_s": wall,
                      "curve/wall_time_s": fit_wall, "curve/train_cpu_s": 1894.5}
        return r

    runs = [final("gpt", 1e14, 1234, 2463.0, 2400.0), final("gpt", 1e14, 10, 268.0, 2716.0),
            final("gpt", 1e14, 2, 2500.0, 2400.0), final("gru", 1e14, 1234, 3971.0, 3900.0),
            final("gru", 1e13, 2, 500.0, 480.0)]
    lines = ft.beyond_table(runs, [1e11, 1e12, 1e13]).splitlines()[2:]
    assert [line.split(" | ")[1:3] for line in lines] == [["gru", "1234"], ["gpt", "2"], ["gpt", "10"], ["gpt", "1234"]], lines
    assert lines[2].endswith("| 1.400 | 1.500 | 1,894 | 2,716 (resumed) |"), lines[2]
    assert lines[1].endswith("| 2,500 |"), lines[1]  # one segment: the process's time, start-up and test included
    assert ft.beyond_table(runs[4:], [1e11, 1e12, 1e13]) is None
