"""The search's committed record (`python -m seqbench.protocol.tuning <dirs> --report <folder>`): trials read from
fake sweep trees as the runs leave them (finished, running, crashed), one grid per family across the
base and edge sweeps, the grid's edges, the untuned baseline's comparison, the loss columns named by
the data they were selected on, and the ledger record; and the untuned baseline's config is the recipe."""

from __future__ import annotations

import copy
import csv
import json
import math

import pytest
from omegaconf import OmegaConf

from conftest import compose_cfg
from seqbench.protocol.tuning_extension import beyond, commands, extensions
from seqbench.protocol.tuning_report import summary_md
from seqbench.protocol.tuning_search import searches
from seqbench.protocol.tuning_trials import planned, read_trials
from seqbench.families import FAMILIES, compared
from seqbench.reports.ledger import read_record
from seqbench.protocol.tuning import main
from seqbench.training.tune import apply_tokens_per_step, apply_tuning

LSTM, GPT = "lstm", "gpt"


def job(sweep, n, family, lr, tokens, loss=6.0, status="completed", corpus="ptb", heldout=False, finished=True,
        budget=1e12, wall=10.0, gap=None, baseline=None, size="m"):
    """A job directory as a tuning sweep leaves it: the saved config and choices, and metrics.json once
    the run has ended (`finished`)."""
    d = sweep / str(n)
    (d / ".hydra").mkdir(parents=True)
    fam = FAMILIES[family]
    OmegaConf.save({"model": {"_target_": fam.module, **fam.selector, "optimizer": {"lr": 1.0}}, "size": "m",
                    "budget": {"flops": budget},
                    "data": {"heldout_score": heldout, **({"T": gap} if gap is not None else {})},
                    "tune": {"lr_scale": lr, "tokens_per_step": tokens}}, d / ".hydra" / "config.yaml")
    OmegaConf.save({"hydra": {"runtime": {"choices": {"preset": f"frontier/{corpus}/{family}"}}}},
                   d / ".hydra" / "hydra.yaml")
    if finished:
        metrics = {"status": status, "val/loss_best": loss, "val/loss": loss, "train/loss": 6.5, "wall_time_s": wall,
                   "budget/flops": budget, "budget/max_steps": 100, "curve/tokens": 100.0 * (tokens or 700),
                   "params_non_embedding": 1000, "tune/size": size, "tune/recipe_lr": 1.0}
        if lr is not None:
            metrics.update({"tune/lr_scale": lr, "tune/lr": lr})
        if tokens is not None:
            metrics["tune/tokens_per_step"] = tokens - 11  # whole streams: not quite the grid's value
        if baseline is not None:
            metrics["val/baseline_loss"] = baseline
        (d / "metrics.json").write_text(json.dumps(metrics))
    return d


def grid(sweep, family, lrs, tokens, losses, start=0, **kw):
    """A full grid of one family; `losses[(lr, tokens)]` where given, 7.0 elsewhere."""
    n = start
    for lr in lrs:
        for t in tokens:
            job(sweep, n, family, lr, t, loss=losses.get((lr, t), 7.0), **kw)
            n += 1
    return n


def test_a_base_sweep_and_its_edge_extension_merge_into_one_grid_per_family(tmp_path):
    # bug caught: trials grouped per sweep directory, so the extension is a search of its own and the
    # base grid's best (on its edge) stays the family's best
    base, edge = tmp_path / "tune_frontier_ptb", tmp_path / "tune_frontier_ptb_edge_tokens"
    grid(base, LSTM, [1, 2], [256, 512], {(2, 256): 6.1})
    grid(edge, LSTM, [1, 2], [128], {(2, 128): 6.0})
    found = searches(read_trials([base, edge]))
    assert len(found) == 1
    (lstm,) = found
    assert (lstm.lr_axis, lstm.tokens_axis, len(lstm.trials)) == ([1, 2], [128, 256, 512], 6)
    assert lstm.best.job == "tune_frontier_ptb_edge_tokens/1" and lstm.best.tokens_grid == 128
    assert lstm.best.tokens_per_step == 117  # what the step held, recorded beside the grid's 128


@pytest.mark.parametrize("best, edges", [((1, 256), ["fewest tokens"]), ((4, 512), ["highest lr"]),
                                         ((2, 512), []), ((0.5, 1024), ["lowest lr", "most tokens"])])
def test_the_best_setting_s_edge_is_found_on_either_axis(tmp_path, best, edges):
    # bug caught: an edge tested against one end of an axis only, or against the wrong axis
    grid(tmp_path / "s", LSTM, [0.5, 1, 2, 4], [256, 512, 1024], {best: 5.0})
    (search,) = searches(read_trials([tmp_path / "s"]))
    assert search.edges() == edges


def test_a_partial_search_takes_its_edges_and_not_started_count_from_the_planned_grid(tmp_path):
    # bug caught: edges read from the points run so far: a family half-way through its rates would
    # have its best "on the highest rate" before the higher ones ran
    sweep = tmp_path / "tune_frontier_ptb"
    grid(sweep, LSTM, [0.5, 1], [256, 512, 1024], {(1, 512): 5.0})
    OmegaConf.save({"hydra": {"sweeper": {"params": {"preset": "${families:frontier/ptb}", "budget.flops": "1e12",
                                                     "tune.lr_scale": "0.5,1,2",
                                                     "tune.tokens_per_step": "256,512,1024"}},
                              "overrides": {"task": ["experiment=tune_frontier_ptb", "tune.lr_scale=0.5,1,2,4"]}}},
                   sweep / "multirun.yaml")
    plans = planned(sweep)
    assert set(plans) == {("ptb", f) for f in compared()}  # the registry's families, from the resolver
    found = {s.family: s for s in searches(read_trials([sweep]), plans)}
    assert found[LSTM].lr_axis == [0.5, 1, 2, 4]  # the command line's axis wins over the experiment's
    assert found[LSTM].edges() == [] and found[LSTM].not_started == 6 and not found[LSTM].complete
    md = summary_md(list(found.values()), "now", [sweep.name], False)
    assert f"| {LSTM} | 1 | 1 | 512 | 501 | 5.000 | 7.000 | no (so far) |" in md  # a partial family's edge is provisional
    assert found[GPT].trials == [] and found[GPT].not_started == 12


def test_a_sweep_that_fixes_a_family_s_point_with_per_family_plans_that_point(tmp_path):
    # bug caught: tune.per_family ignored by the planned grid, so a sweep run at each family's own
    # setting (tune.lr_scale=1 beside it) planned the point lr x 1 that never runs: "not started" forever
    sweep = tmp_path / "context256_ptb"
    sweep.mkdir()
    OmegaConf.save({"hydra": {"sweeper": {"params": {"budget.flops": "1e12", "tune.lr_scale": "0.5,1,2"}},
                              "overrides": {"task": [f"preset=frontier/ptb/{LSTM},frontier/ptb/{GPT}", "tune.lr_scale=1",
                                                     "tune.tokens_per_step=null",
                                                     f"tune.per_family={{{LSTM}:{{lr_scale:2,tokens_per_step:512}}}}"]}}},
                   sweep / "multirun.yaml")
    plans = planned(sweep)
    assert plans[("ptb", LSTM)] == {(1e12, 2.0, 512, None)}
    assert plans[("ptb", GPT)] == {(1e12, 1.0, None, None)}  # a family without an entry keeps the sweep's axes


def test_a_running_trial_is_counted_as_not_finished_and_a_crashed_or_diverged_one_is_not_a_candidate(tmp_path):
    # bug caught: a job without metrics.json (still running) counted as failed, or a NaN picked as best
    sweep = tmp_path / "s"
    job(sweep, 0, LSTM, 1, 256, loss=6.0, wall=30.0)
    job(sweep, 1, LSTM, 2, 256, finished=False)  # running
    job(sweep, 2, LSTM, 4, 256, loss=math.nan, wall=20.0)  # diverged
    job(sweep, 3, LSTM, 0.5, 256, finished=False)  # crashed before it wrote metrics.json
    (sweep / "jobs.jsonl").write_text(json.dumps({"job": 3, "status": "failed", "dir": str(sweep / "3")}) + "\n")
    job(sweep, 4, LSTM, 0.25, 256, loss=5.0, status="failed", wall=5.0)  # a loss, but the run failed
    (search,) = searches(read_trials([sweep]))
    counts = {s: search.count(s) for s in ("completed", "running", "diverged", "failed")}
    assert counts == {"completed": 1, "running": 1, "diverged": 1, "failed": 2}
    assert search.best.lr_scale == 1 and search.wall_time_s == 55.0  # the finished trials' cost
    md = summary_md(searches(read_trials([sweep])), "2026-11-26T22:00:00+00:00", ["s"], False)
    assert "partial: 1 not finished and 0 not started" in md


def test_the_untuned_baseline_is_compared_with_the_right_sign_and_grouped_by_its_model(tmp_path):
    # bug caught: the difference taken untuned - tuned (a worse search reads as a gain), the
    # baseline's runs (no tune/lr_scale, no tune/tokens_per_step) grouped nowhere, or a tuned run
    # in the baseline's sweep averaged into the untuned loss
    sweep, base = tmp_path / "search", tmp_path / "untuned"
    grid(sweep, LSTM, [1, 2], [256, 512], {(2, 256): 6.0})
    grid(sweep, GPT, [1, 2], [256, 512], {(1, 512): 6.0}, start=4)
    job(base, 0, LSTM, None, None, loss=6.5)  # the recipe: lr as it is, its own batch
    job(base, 1, GPT, None, None, loss=5.9)
    job(base, 2, LSTM, 2, None, loss=1.0)  # not the recipe (lr x 2): not a baseline run
    found = {s.family: s for s in searches(read_trials([sweep]), untuned=read_trials([base]))}
    assert found[LSTM].gain == pytest.approx(-0.5) and found[LSTM].tuned_beats_untuned is True
    assert found[GPT].gain == pytest.approx(0.1) and found[GPT].tuned_beats_untuned is False
    assert found[LSTM].untuned[0].tokens_per_step == 700  # the recipe's tokens per step, measured
    md = summary_md(list(found.values()), "2026-11-26T22:00:00+00:00", ["search"], True)
    rows = {line.split(" | ")[0].strip("| "): line for line in md.splitlines() if line.endswith((" yes |", " no |"))}
    assert rows[LSTM].endswith("| 6.500 | -0.500 | yes |") and rows[GPT].endswith("| 5.900 | +0.100 | no |")


def test_the_loss_columns_name_the_selection_half_on_shakespeare_and_the_validation_split_on_ptb(tmp_path):
    # bug caught: the loss labelled by the corpus's usual split, not by what the runs selected on
    # (data.heldout_score: the validation tenth's first half; its second half is the held-out score)
    grid(tmp_path / "sh", LSTM, [1, 2], [256, 512], {}, corpus="shakespeare", heldout=True)
    grid(tmp_path / "ptb", LSTM, [1, 2], [256, 512], {}, corpus="ptb")
    md = summary_md(searches(read_trials([tmp_path / "sh", tmp_path / "ptb"])), "now", ["sh", "ptb"], False)
    shakespeare, ptb = md.split("## ptb\n")
    assert "best loss (selection half of validation)" in shakespeare and "best loss (validation)" not in shakespeare
    assert "best loss (validation)" in ptb and "selection half" not in ptb


def test_the_report_writes_one_row_per_trial_and_its_ledger_record(tmp_path, capsys):
    # bug caught: the record not written (the page's numbers would have no provenance), or a running
    # trial left out of trials.csv
    sweep, out = tmp_path / "tune_frontier_ptb", tmp_path / "report"
    grid(sweep, LSTM, [1, 2], [256], {(2, 256): 6.0})
    job(sweep, 2, GPT, 1, 256, finished=False)
    main([str(sweep), "--report", str(out)])
    printed = capsys.readouterr().out  # the table printed for the terminal names the cost as the record does
    assert "| cost (core-s) | wall time (s) |" in printed
    with open(out / "trials.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["job"], r["family"], r["status"]) for r in rows] == [
        ("tune_frontier_ptb/0", LSTM, "completed"), ("tune_frontier_ptb/1", LSTM, "completed"),
        ("tune_frontier_ptb/2", GPT, "running")]
    assert rows[1]["val_loss_best"] == "6.0" and rows[1]["tokens_per_step"] == "245"
    (record,) = read_record(out / "record.json", tmp_path)
    assert set(record.files) == {"trials.csv", "summary.md", "grid-ptb.png"}
    assert record.command.startswith("python -m seqbench.protocol.tuning") and "--report" in record.command


@pytest.mark.parametrize("experiment, corpus", [("tune_frontier", "shakespeare"), ("tune_frontier_ptb", "ptb")])
def test_the_untuned_baseline_runs_each_family_s_recipe_as_it_is(experiment, corpus, tmp_path):
    # bug caught: the tuning block touching a recipe it has nothing to change in (a step-wise scheduler
    # interval, a rate rounded, a batch size set) when the schedule is null, lr x 1 and tokens null
    for family in compared():
        args = [f"experiment={experiment}", f"preset=frontier/{corpus}/{family}", "logger=csv"]
        untuned = compose_cfg([*args, "tune.schedule=null"], tmp_path)
        recipe = copy.deepcopy(untuned)
        record = apply_tuning(untuned)
        assert record["tune/lr_scale"] == 1.0 and "tune/schedule" not in record, family
        assert apply_tokens_per_step(untuned, model=None, datamodule=None) == {}, family
        for node in ("model", "trainer", "data"):
            assert OmegaConf.to_container(untuned[node], resolve=True) == \
                OmegaConf.to_container(recipe[node], resolve=True), (family, node)


def test_the_edge_rule_extends_every_family_one_step_beyond_each_edge_any_family_hit(tmp_path):
    # bugs caught: only the family on the edge extended (the others' searches would differ); the step
    # not the grid's own ratio; the corner (new rate, new token count) missing or run twice
    lrs, tokens = [0.25, 0.5, 1, 2, 4], [256, 512, 1024, 2048]
    sweep = tmp_path / "tune_frontier_ptb"
    grid(sweep, LSTM, lrs, tokens, {(4, 1024): 5.0})                # highest lr
    grid(sweep, GPT, lrs, tokens, {(1, 256): 5.0}, start=20)        # fewest tokens
    OmegaConf.save({"hydra": {"overrides": {"task": ["experiment=tune_frontier_ptb", "logger=csv"]},
                              "sweeper": {"params": {"preset": "${families:frontier/ptb}", "budget.flops": "1e12",
                                                     "tune.lr_scale": "0.25,0.5,1,2,4",
                                                     "tune.tokens_per_step": "256,512,1024,2048"}}}},
                   sweep / "multirun.yaml")
    found = [s for s in searches(read_trials([sweep])) if s.family in (LSTM, GPT)]
    (ext,) = extensions(found)
    assert ext.new_lrs == [8] and ext.new_tokens == [128] and ext.reasons == {LSTM: ["highest lr"], GPT: ["fewest tokens"]}
    points = {(lr, t) for lr in lrs for t in tokens}
    for _name, overrides in ext.sweeps("tune_frontier_ptb"):
        axes = dict(o.split("=") for o in overrides.split()[1:])
        new = {(float(lr), int(t)) for lr in axes["tune.lr_scale"].split(",") for t in axes["tune.tokens_per_step"].split(",")}
        assert not new & points  # no point twice
        points |= new
    assert points == {(lr, t) for lr in [*lrs, 8] for t in [128, *tokens]}  # the extended rectangle, whole
    lines = commands(found, [sweep])
    assert lines[1].startswith("bash scripts/sweep_background.sh tune_frontier_ptb_edge_tokens experiment=tune_frontier_ptb ")
    assert beyond([0.1, 0.3, 0.9], 0) == pytest.approx(1 / 30) and beyond([256, 512], -1) == 1024


def test_a_grid_whose_bests_lie_inside_needs_no_extension(tmp_path):
    # bug caught: an extension proposed from the grid's axes alone (every grid has edges)
    grid(tmp_path / "s", LSTM, [0.5, 1, 2], [256, 512, 1024], {(1, 512): 5.0})
    assert extensions(searches(read_trials([tmp_path / "s"]))) == [] and commands(searches(read_trials([tmp_path / "s"])), []) == []


def test_a_trial_that_diverged_after_its_best_validation_is_never_the_best_setting(tmp_path):
    # bug caught: seqbench.training.run writes a NaN or infinite loss into metrics.json as null (JSON has no NaN),
    # and a null was read as finite: a run whose loss blew up after a good first validation read as
    # completed, became the family's best, and the chain (tuning.summary -> per_family) transferred it
    from seqbench.training.record import read_runs
    from seqbench.training.record import write_metrics
    from seqbench.protocol.tuning import per_family, summary

    sweep = tmp_path / "tune_frontier_ptb"
    grid(sweep, LSTM, [1, 2], [256], {(1, 256): 6.0})
    blew_up = job(sweep, 2, LSTM, 4, 256, finished=False)
    write_metrics(blew_up / "metrics.json", {  # as the run leaves it: the first validation good, then NaN
        "status": "completed", "val/loss_best": 5.0, "val/loss": math.nan, "train/loss": math.inf,
        "budget/flops": 1e12, "params_non_embedding": 1000, "tune/lr_scale": 4.0, "tune/tokens_per_step": 245,
        "wall_time_s": 10.0})
    (search,) = searches(read_trials([sweep]))
    assert search.count("diverged") == 1 and search.best.lr_scale == 1
    assert per_family(summary(read_runs([sweep]))) == {LSTM: {"lr_scale": 1.0, "tokens_per_step": 245}}


def test_the_printed_table_groups_a_search_whose_older_runs_did_not_record_their_size_as_the_record_does(tmp_path):
    # bug caught: the table (tuning.summary) taking a trial's size from metrics.json alone, which runs
    # older than `tune/size` lack: one family's search printed as two rows, each with its own best (the
    # PTB search's gru, 20 trials, as 7 and 13), where the record (read with the saved configs) has one
    from seqbench.training.record import read_runs
    from seqbench.protocol.tuning import summary

    sweep = tmp_path / "tune_frontier_ptb"
    grid(sweep, LSTM, [1, 2], [256], {(2, 256): 5.0})
    older = sweep / "0" / "metrics.json"
    older.write_text(json.dumps({k: v for k, v in json.loads(older.read_text()).items() if k != "tune/size"}))
    rows = summary(read_runs([sweep]))
    assert [(r["family"], r["trials"], r["best"]) for r in rows] == [(LSTM, 2, {"lr_scale": 2.0, "tokens_per_step": 245})]
    (search,) = searches(read_trials([sweep]))
    assert (len(search.trials), search.best.loss) == (2, rows[0]["best_loss"])


def test_an_extended_grid_s_edge_is_reported_and_no_second_extension_is_printed_into_the_first_s_directory(tmp_path):
    # bug caught: `python -m seqbench.protocol.tuning <base> <base>_edge_lr` printed the edge rule's command again
    # for the extended grid, under the same sweep name (<base>_edge_lr) with another grid: run as printed,
    # the resumable launcher skips the new grid's jobs as "completed" (their numbers are the old jobs')
    lrs, tokens = [0.25, 0.5, 1, 2, 4], [256, 512, 1024, 2048]
    base, edge = tmp_path / "tune_frontier_ptb", tmp_path / "tune_frontier_ptb_edge_lr"
    grid(base, LSTM, lrs, tokens, {(4, 1024): 5.0})
    OmegaConf.save({"hydra": {"overrides": {"task": ["experiment=tune_frontier_ptb"]},
                              "sweeper": {"params": {"preset": "frontier/ptb/lstm", "budget.flops": "1e12",
                                                     "tune.lr_scale": "0.25,0.5,1,2,4",
                                                     "tune.tokens_per_step": "256,512,1024,2048"}}}},
                   base / "multirun.yaml")
    grid(edge, LSTM, [8], tokens, {(8, 1024): 4.0})  # the new best, on the extended grid's edge
    lines = commands(searches(read_trials([base, edge])), [base, edge])
    assert not [line for line in lines if line.startswith("bash ")], lines
    assert any("tune_frontier_ptb_edge_lr has run" in line for line in lines), lines


def test_an_edge_after_the_extension_is_reported_not_chased(tmp_path):
    # bug caught: the extended search's summary asked for the extension it already holds ("the grid is
    # extended beyond that edge"), where the protocol extends once and reports the edges left
    sweep = tmp_path / "s"
    grid(sweep, LSTM, [0.5, 1, 2], [256, 512, 1024], {(1, 256): 5.0})
    found = searches(read_trials([sweep]))
    base = summary_md(found, "now", ["tune_frontier_ptb"], False)
    extended = summary_md(found, "now", ["tune_frontier_ptb", "tune_frontier_ptb_edge_tokens"], False)
    assert "fewest tokens" in base and "the grid is extended beyond that edge" in base
    assert "extended once already (tune_frontier_ptb_edge_tokens): these edges are reported, not chased" in extended
    assert "extended beyond" not in extended


def test_one_corpus_s_extension_is_not_named_in_the_other_corpus_s_notes(tmp_path):
    # bug caught: a two-corpus record named every source's extension under each corpus, so Shakespeare's
    # edges read "extended once already (tune_frontier_ptb_edge_tokens)" and were never chased
    shakespeare, ptb, edge = (tmp_path / n for n in ("tune_frontier", "tune_frontier_ptb", "tune_frontier_ptb_edge_tokens"))
    grid(shakespeare, LSTM, [0.5, 1, 2], [256, 512, 1024], {(1, 256): 1.5}, corpus="shakespeare")
    grid(ptb, LSTM, [0.5, 1, 2], [256, 512, 1024], {(1, 256): 5.0})
    grid(edge, LSTM, [0.5, 1, 2], [128], {(1, 128): 4.9})
    found = searches(read_trials([shakespeare, ptb, edge]))
    text = summary_md(found, "now", [shakespeare.name, ptb.name, edge.name], False)
    mine, theirs = text.split("## ptb")[0], text.split("## ptb")[1]
    assert "## shakespeare" in mine and "the grid is extended beyond that edge" in mine
    assert "tune_frontier_ptb" not in mine  # neither its sweeps nor its extension are Shakespeare's
    assert "extended once already (tune_frontier_ptb_edge_tokens)" in theirs


def test_a_probe_search_over_two_gaps_picks_one_rate_by_its_mean_loss_over_both(tmp_path, capsys):
    # bugs caught: the lowest single trial taken as the best, which is always a short-gap trial (the easy
    # task's rate: here x 3.16, which fails at T = 500); the gap left out of the grid's points, so a rate
    # run at T = 100 counts as started and the search as complete while its T = 500 trial has not run
    sweep = tmp_path / "long_range_lr"
    losses = {(1, 100): 0.30, (1, 500): 0.50, (3.16, 100): 0.10, (3.16, 500): 0.90}
    for n, ((lr, gap), loss) in enumerate(losses.items()):
        job(sweep, n, LSTM, lr, None, loss=loss, corpus="probe", budget=None, gap=gap)
    OmegaConf.save({"hydra": {"sweeper": {"params": {"preset": "probe/lstm", "data.T": "100,500",
                                                     "tune.lr_scale": "1,3.16,10"}},
                              "overrides": {"task": ["experiment=long_range_lr"]}}}, sweep / "multirun.yaml")
    (search,) = searches(read_trials([sweep]), planned(sweep))
    assert search.gaps == [100, 500]
    assert search.best.lr_scale == 1 and search.best.loss == pytest.approx(0.40)
    assert search.not_started == 2 and not search.complete  # lr x 10 at both gaps
    main([str(sweep), "--report", str(tmp_path / "report")])
    assert "lowest mean selection loss over them" in capsys.readouterr().out
    assert "best loss (validation, best: mean over T = 100, 500)" in (tmp_path / "report" / "summary.md").read_text()
    from seqbench.protocol.tuning_heatmap import _cells  # the picture's rows are the gaps (no tokens axis)

    grid_, letters = _cells(search)
    assert grid_[0][:2] == [0.30, 0.10] and grid_[1][:2] == [0.50, 0.90] and math.isnan(grid_[0][2]) and not letters
    job(sweep, 4, LSTM, 10, None, loss=0.05, corpus="probe", budget=None, gap=100)  # x 10 run at T = 100 only
    (search,) = searches(read_trials([sweep]), planned(sweep))
    assert search.best.lr_scale == 1 and search.not_started == 1  # one gap is not a setting's whole score


def test_a_probe_search_that_stayed_at_chance_picks_no_rate(tmp_path, capsys):
    # bug caught: the lowest of losses at chance (log 8 = 2.0794 give or take a finite sample's noise)
    # picked as the family's rate, as the first read of experiment=long_range_lr picked the LSTM's
    sweep = tmp_path / "long_range_lr"
    chance = math.log(8)
    at_chance = {(1, 100): 2.0795, (1, 500): 2.0794, (3.16, 100): 2.0792, (3.16, 500): 2.0796}
    learned = {(1, 100): 1.19, (1, 500): 1.40, (3.16, 100): 2.0299, (3.16, 500): 2.0794}
    for n, ((lr, gap), loss) in enumerate(at_chance.items()):
        job(sweep, n, LSTM, lr, None, loss=loss, corpus="probe", budget=None, gap=gap, baseline=chance)
    for n, ((lr, gap), loss) in enumerate(learned.items(), start=4):
        job(sweep, n, "gru", lr, None, loss=loss, corpus="probe", budget=None, gap=gap, baseline=chance)
    lstm, gru = searches(read_trials([sweep]))
    assert lstm.learned_nothing and lstm.best is None and lstm.edges() == []
    assert not gru.learned_nothing and gru.best.lr_scale == 1  # 2.0299 is 2.4 % under chance: not learning
    assert not [t for t in gru.candidates if t.lr_scale == 3.16 and t.learned]
    main([str(sweep), "--report", str(tmp_path / "report")])
    printed = capsys.readouterr().out
    assert "none learned (recipe's x 1)" in printed and "lstm:" not in printed.split("per_family")[-1]
    summary = (tmp_path / "report" / "summary.md").read_text()
    assert "none learned: recipe's x 1" in summary and "learned nothing at any rate: lstm" in summary


def test_a_probe_search_whose_best_rate_is_the_highest_tried_is_extended_on_the_rate_alone(tmp_path, capsys):
    # bug caught: the edge rule took only searches with a tokens axis, so the probes' search (the rate
    # alone) never had its edge extended: the attention models' best lay on the highest rate tried
    # (x 10) and nothing was printed; an extension that kept a tokens override would run an empty one
    sweep = tmp_path / "long_range_lr"
    losses = {(1, 100): 0.30, (1, 500): 0.50, (3.16, 100): 0.10, (3.16, 500): 0.20, (10, 100): 0.001, (10, 500): 0.002}
    for n, ((lr, gap), loss) in enumerate(losses.items()):
        job(sweep, n, GPT, lr, None, loss=loss, corpus="probe", budget=None, gap=gap)
    OmegaConf.save({"hydra": {"sweeper": {"params": {"preset": "probe/gpt", "data.T": "100,500",
                                                     "tune.lr_scale": "1,3.16,10"}},
                              "overrides": {"task": ["experiment=long_range_lr"]}}}, sweep / "multirun.yaml")
    found = searches(read_trials([sweep]), planned(sweep))
    (ext,) = extensions(found)
    assert ext.reasons == {GPT: ["highest lr"]} and ext.new_lrs == [pytest.approx(31.6456, rel=1e-3)]
    assert ext.sweeps("long_range_lr") == [("long_range_lr_edge_lr", "experiment=long_range_lr tune.lr_scale=31.6456")]
    main([str(sweep), "--report", str(tmp_path / "report")])
    assert "bash scripts/sweep_background.sh long_range_lr_edge_lr experiment=long_range_lr tune.lr_scale=31.6456" \
        in capsys.readouterr().out
    # the record's row: no tokens axis is a dash, not "None"; a solved probe's loss is not rounded to 0.000
    assert "| gpt | 10 | 10 | – | 700 | 1.5e-03 | 0.150 | highest lr |" in (tmp_path / "report" / "summary.md").read_text()


def test_a_family_searched_twice_takes_its_setting_from_the_search_with_the_most_trials(tmp_path, capsys):
    # bug caught: the tuned setting (and the transfer check's tokens around it) taken from the search with
    # the fewest trials: here a two-trial search at another size, whose best loss is even the lower one
    from seqbench.protocol.tuning_search import token_neighbours

    base, edge = tmp_path / "tune_frontier_ptb", tmp_path / "tune_frontier_ptb_edge_tokens"
    n = grid(base, LSTM, [1, 2], [256, 512], {(2, 256): 6.1})
    grid(base, LSTM, [1, 4], [1024], {(4, 1024): 5.5}, start=n, size="s")  # a small search beside it
    grid(edge, LSTM, [1, 2], [128], {(2, 128): 6.0})  # the base grid's edge extension: its best
    found = searches(read_trials([base, edge]))
    assert sorted((s.size, len(s.trials), s.best.lr_scale, s.best.tokens_grid) for s in found) == [
        ("m", 6, 2, 128), ("s", 2, 4, 1024)]
    main([str(base), str(edge)])
    printed = capsys.readouterr().out.split("# tune.per_family for the runs that use the result:")[1]
    tuned = OmegaConf.to_container(OmegaConf.create(printed))["tune"]["per_family"]
    assert tuned == {LSTM: {"lr_scale": 2.0, "tokens_per_step": 117}}, "the setting of the 2-trial search, not the 6-trial one"
    assert token_neighbours(found) == {LSTM: [256]}, "the tokens around the 2-trial search's best"


def _two_budget_sweep(sweep, ran_at_1e13):
    """A sweep that plans budget.flops=1e12,1e13 in one multirun over a 2 x 2 grid; the grid run in full at
    1e12 and its first `ran_at_1e13` points at 1e13 (each job one point, as Hydra numbers them)."""
    n = grid(sweep, LSTM, [1, 2], [256, 512], {(2, 256): 6.0})
    for i, (lr, tokens) in enumerate([(1, 256), (1, 512), (2, 256), (2, 512)][:ran_at_1e13]):
        job(sweep, n + i, LSTM, lr, tokens, loss=5.0 + i / 10, budget=1e13)
    OmegaConf.save({"hydra": {"sweeper": {"params": {"preset": f"frontier/ptb/{LSTM}", "budget.flops": "1e12,1e13",
                                                     "tune.lr_scale": "1,2", "tune.tokens_per_step": "256,512"}},
                              "overrides": {"task": ["experiment=tune_frontier_ptb"]}}}, sweep / "multirun.yaml")


def test_a_sweep_planning_two_budgets_counts_each_budget_s_grid_in_its_own_search(tmp_path):
    # bug caught: every budget's planned points counted in each budget's search, so the 1e12 search, run in
    # full, reads "4 not started" and both grids 8 points
    sweep = tmp_path / "tune_frontier_ptb"
    _two_budget_sweep(sweep, ran_at_1e13=3)
    found = searches(read_trials([sweep]), planned(sweep))
    assert [(s.budget, len(s.points), s.not_started, s.complete) for s in found] == [(1e12, 4, 0, True), (1e13, 4, 1, False)]
    md = summary_md(found, "now", [sweep.name], False)
    assert "7 of 8 trials finished (partial: 0 not finished and 1 not started" in md, md
    assert f"| {LSTM} | m | 1,000 | 1e12 | 4 | 4 | 0 | 0 | 0 | 0 |" in md and f"| {LSTM} | m | 1,000 | 1e13 | 4 | 3 | 0 | 0 | 0 | 1 |" in md


def test_a_planned_budget_no_trial_has_reached_is_a_search_not_started(tmp_path):
    # bug caught: a budget of the sweep without a trial yet folded into no search, so a sweep whose 1e12
    # grid had finished was recorded "complete" before any of its 1e13 trials ran
    sweep = tmp_path / "tune_frontier_ptb"
    _two_budget_sweep(sweep, ran_at_1e13=0)
    found = searches(read_trials([sweep]), planned(sweep))
    assert [(s.budget, len(s.trials), s.not_started, s.complete) for s in found] == [(1e12, 4, 0, True), (1e13, 0, 4, False)]
    assert "4 of 8 trials finished (partial: 0 not finished and 4 not started" in summary_md(found, "now", [sweep.name], False)
