"""The tuning protocol's chain (`python -m seqbench.protocol.campaign`): its steps read from the sweeps before
them, a sweep marked done only when every job completed, and a done sweep never launched again."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from omegaconf import OmegaConf

from seqbench.protocol.campaign import failed_jobs, main, run_sweep
from seqbench.protocol.chain import DONE, Chain, parse_commands
from test_tuning_record import GPT, LSTM, grid, job

# stands in for src/train.py: appends a launch to launches.txt and writes the outcomes of $OUTCOMES, whose
# `;`-separated parts are the outcomes of the first, second, ... launch (the last part repeats); a job
# that completed before is skipped, as the resumable launcher skips it
FAKE_TRAIN = """
import json, os, sys
sweep = [a.split("=", 1)[1] for a in sys.argv if a.startswith("hydra.sweep.dir=")][0]
log = os.path.join(sweep, "launches.txt")
launch = len(open(log).read().splitlines()) if os.path.exists(log) else 0
open(log, "a").write(" ".join(sys.argv[1:]) + "\\n")
if os.environ.get("REFUSED"):  # the launcher refuses before any job runs (a job folder of another grid)
    sys.exit(1)
parts = os.environ["OUTCOMES"].split(";")
jobs = os.path.join(sweep, "jobs.jsonl")
last = {}
for line in open(jobs).read().splitlines() if os.path.exists(jobs) else []:
    last[json.loads(line)["job"]] = json.loads(line)["status"]
with open(jobs, "a") as f:
    for job, status in enumerate(parts[min(launch, len(parts) - 1)].split(",")):
        if last.get(job) != "completed":
            f.write(json.dumps({"job": job, "status": status}) + "\\n")
if os.environ.get("STOPPED"):  # someone stops the sweep: its launcher gets SIGTERM
    os.kill(os.getpid(), 15)
sys.exit(1 if any(last.get(j) != "completed" and s == "failed"
                  for j, s in enumerate(parts[min(launch, len(parts) - 1)].split(","))) else 0)
"""


def test_a_sweep_is_done_only_when_every_job_completed_and_is_never_launched_again(tmp_path, monkeypatch):
    # bugs caught: `campaign.done` written while a job failed (the chain would go on without its
    # cells, here after the first launch); one failure (a job killed for memory on the shared machine)
    # stopping the unattended chain until a person comes back, rather than a resumed launch; a done
    # sweep launched again (every resumption re-pays the launcher's start-up); the launcher's last
    # outcome per job not the one read (a job that failed, then completed on resume)
    train = tmp_path / "train.py"
    train.write_text(FAKE_TRAIN)
    monkeypatch.setenv("OUTCOMES", "completed,failed;completed,completed")  # job 1 fails once
    assert run_sweep(tmp_path, "s", ["experiment=x"], 1, ["logger=csv"], log=lambda *_: None, train=str(train))
    assert failed_jobs(tmp_path / "s") == [] and "failed" not in (tmp_path / "s" / DONE).read_text()
    assert run_sweep(tmp_path, "s", ["experiment=x"], 1, [], log=lambda *_: None, train=str(train))
    launches = (tmp_path / "s" / "launches.txt").read_text().splitlines()
    assert len(launches) == 2 and "hydra/launcher=resumable" in launches[0] and launches[0].endswith("experiment=x logger=csv")


def test_a_job_that_fails_at_every_launch_does_not_stop_the_chain_forever(tmp_path, monkeypatch):
    # bug caught: a job that fails at every launch (a deterministic crash) blocking every later step
    # forever, since each resumption of the chain runs it again and stops again
    train = tmp_path / "train.py"
    train.write_text(FAKE_TRAIN)
    monkeypatch.setenv("OUTCOMES", "completed,failed,completed")
    assert run_sweep(tmp_path, "s", [], 1, [], log=lambda *_: None, train=str(train), attempts=3)
    assert len((tmp_path / "s" / "launches.txt").read_text().splitlines()) == 3  # job 1 given three chances
    assert "failed at each of 3 launches: jobs [1]" in (tmp_path / "s" / DONE).read_text()


def test_a_launch_that_runs_no_job_is_neither_retried_nor_given_up_on(tmp_path, monkeypatch):
    # bug caught: a launcher that refuses before any job runs (exit 1) read as the earlier launch's
    # failure again, so after three such launches the old grid's sweep is marked done and the chain goes on
    train = tmp_path / "train.py"
    train.write_text(FAKE_TRAIN)
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "jobs.jsonl").write_text("".join(json.dumps({"job": j, "status": s}) + "\n"
                                                       for j, s in enumerate(["completed", "failed"])))
    assert failed_jobs(tmp_path / "s") == [1]  # an earlier launch's failure, on record
    monkeypatch.setenv("OUTCOMES", "completed,failed")
    monkeypatch.setenv("REFUSED", "1")
    assert not run_sweep(tmp_path, "s", [], 1, [], log=lambda *_: None, train=str(train), attempts=3)
    assert len((tmp_path / "s" / "launches.txt").read_text().splitlines()) == 1 and not (tmp_path / "s" / DONE).exists()


def test_the_edges_step_extends_every_family_from_the_base_search_alone(tmp_path):
    # bugs caught: the extension read from the base and its own extension sweeps (after they ran, the
    # step would ask for another step beyond: the protocol extends once), or the printed commands
    # not parsed into the sweeps run (names with the experiment's prefix, the overrides whole)
    lrs, tokens = [0.25, 0.5, 1, 2, 4], [256, 512, 1024, 2048]
    base = tmp_path / "tune_frontier_ptb"
    grid(base, LSTM, lrs, tokens, {(4, 1024): 5.0})
    grid(base, GPT, lrs, tokens, {(1, 512): 5.5}, start=20)  # inside
    OmegaConf.save({"hydra": {"overrides": {"task": ["experiment=tune_frontier_ptb"]},
                              "sweeper": {"params": {"preset": "frontier/ptb/lstm,frontier/ptb/gpt", "budget.flops": "1e12",
                                                     "tune.lr_scale": "0.25,0.5,1,2,4",
                                                     "tune.tokens_per_step": "256,512,1024,2048"}}}},
                   base / "multirun.yaml")
    chain = Chain("tune_frontier_ptb", tmp_path)
    expected = [("tune_frontier_ptb_edge_lr", ["experiment=tune_frontier_ptb", "tune.lr_scale=8",
                                               "tune.tokens_per_step=256,512,1024,2048"])]
    assert chain.edges() == expected
    grid(tmp_path / "tune_frontier_ptb_edge_lr", LSTM, [8], tokens, {(8, 1024): 4.0})  # the new best, on the new edge
    assert chain.edges() == expected and [d.name for d in chain.search_dirs()] == [base.name, "tune_frontier_ptb_edge_lr"]


def test_printed_commands_become_sweeps_and_comments_are_skipped():
    # bug caught: a quoted tune.per_family={...} split at its commas or braces
    lines = ["# 1e12 FLOPs: the size ...",
             "bash scripts/sweep_background.sh frontier_tuned_seeds_1e12 experiment=tune_frontier seed=2,3 "
             "'tune.per_family={lstm:{lr_scale:2,size:l},gpt:{lr_scale:0.5,size:m}}'"]
    assert parse_commands(lines) == [("frontier_tuned_seeds_1e12", [
        "experiment=tune_frontier", "seed=2,3", "tune.per_family={lstm:{lr_scale:2,size:l},gpt:{lr_scale:0.5,size:m}}"])]


def test_failed_jobs_reads_the_last_outcome_of_each_job(tmp_path):
    # bug caught: the first outcome of a job read (a job that failed, then completed on resume)
    (tmp_path / "jobs.jsonl").write_text("\n".join(json.dumps(e) for e in [
        {"job": 0, "status": "failed"}, {"job": 1, "status": "completed"}, {"job": 0, "status": "completed"},
        {"job": 2, "status": "failed"}]) + "\n")
    assert failed_jobs(tmp_path) == [2]


def test_the_transfer_check_runs_each_tuned_setting_and_its_neighbours_at_every_other_tier_the_highest_first(tmp_path):
    # bugs caught: the neighbours taken around the recipe's rate (lr x 1) rather than the tuned one; the
    # check run at the searched tier (it would check nothing), at PTB's first tier above it only (3e12: the
    # PTB recurrent nets' inherited 128 tokens a step held there and failed at 1e13), a tier left
    # unchecked (its cells would train with a setting nobody tried there), or at another size than the
    # searched one; the tokens axis left unchecked, or its neighbours taken off the grid
    for experiment, corpus, tiers in (("tune_frontier", "shakespeare", ("1e13", "1e11")),
                                      ("tune_frontier_ptb", "ptb", ("1e13", "3e12"))):
        base = tmp_path / corpus / experiment
        grid(base, LSTM, [1, 2, 4], [256, 512, 1024], {(2, 512): 1.5}, corpus=corpus, heldout=corpus == "shakespeare")
        sweeps = Chain(experiment, tmp_path / corpus).transfer()
        assert len(sweeps) == 4
        for tier, ((rates, rates_overrides), (tokens, tokens_overrides)) in zip(tiers, (sweeps[:2], sweeps[2:])):
            common = [f"experiment={experiment}", f"preset=frontier/{corpus}/{LSTM}", "size=m", f"budget.flops={tier}"]
            assert rates == f"{experiment}_transfer_{tier}_{LSTM}" and tokens == f"{experiment}_transfer_tokens_{tier}_{LSTM}"
            assert rates_overrides == [*common, "tune.lr_scale=1,2,4", "tune.tokens_per_step=501"]  # the tokens the best's steps held
            assert tokens_overrides == [*common, "tune.lr_scale=2", "tune.tokens_per_step=256,1024"]  # the grid's, as asked


def test_a_tier_where_the_transfer_check_found_a_better_setting_trains_its_final_cells_with_it(tmp_path):
    # bugs caught: the final cells trained at every tier with the setting searched at 1e12 whatever the
    # check found (PTB's small GRU: perplexity 401 at 1e13 against its untuned recipe's 177); a diverged
    # trial chosen for its low loss before it blew up; a tier whose tuned setting held, or lost by less than
    # the seed noise (transfer.MARGIN), given a new sweep;
    # the size chosen at a moved tier from the runs at the superseded setting (here the old setting's
    # size s has the lowest loss of all, 1.0), and those runs' seeds then spent on a setting not used
    from seqbench.training.record import read_runs
    from seqbench.protocol.transfer_check import checks, per_tier
    from seqbench.protocol.transfer import markdown

    grid(tmp_path / "tune_frontier", LSTM, [1, 2, 4], [256, 512, 1024], {(2, 512): 1.5}, corpus="shakespeare", heldout=True)
    shakespeare = {"corpus": "shakespeare", "heldout": True}
    rates, tokens = tmp_path / "tune_frontier_transfer_1e13_lstm", tmp_path / "tune_frontier_transfer_tokens_1e13_lstm"
    for n, (lr, loss) in enumerate([(1, 1.48), (2, 1.45), (4, 1.0)]):
        d = job(rates, n, LSTM, lr, 512, loss=loss, budget=1e13, **shakespeare)
    metrics = json.loads((d / "metrics.json").read_text())  # lr x 8 blew up after its best validation (null: NaN)
    (d / "metrics.json").write_text(json.dumps({**metrics, "val/loss": None, "train/loss": None}))
    for n, (t, loss) in enumerate([(256, 1.50), (1024, 1.40)]):
        job(tokens, n, LSTM, 2, t, loss=loss, budget=1e13, **shakespeare)
    # 1024 is the most tokens the neighbours tried and their best: the check doubles it once (1024 stays the best)
    job(tmp_path / "tune_frontier_transfer_tokens_1e13_lstm_2048", 0, LSTM, 2, 2048, loss=1.42, budget=1e13, **shakespeare)
    low = tmp_path / "tune_frontier_transfer_1e11_lstm"
    for n, (lr, loss) in enumerate([(1, 1.795), (2, 1.8), (4, 1.85)]):  # at 1e11 lr x 1 wins inside the seed noise
        job(low, n, LSTM, lr, 512, loss=loss, budget=1e11, **shakespeare)
    chain = Chain("tune_frontier", tmp_path)
    tuned = {LSTM: {"lr_scale": 2.0, "tokens_per_step": 501}}
    found = checks(read_runs(chain.transfer_dirs()), tuned)
    assert per_tier(tuned, found) == {(LSTM, 1e13): {"lr_scale": 2.0, "tokens_per_step": 1013}}
    # a check still running moves nothing: here the tokens neighbours' sweep planned one more trial
    assert per_tier(tuned, checks(read_runs(chain.transfer_dirs()), tuned, {(LSTM, 1e13): 7})) == {}
    assert "moved: 0.0500 (so far) | 6 of 7 |" in markdown(checks(read_runs(chain.transfer_dirs()), tuned, {(LSTM, 1e13): 7}))
    # the chain's own sweeps: 3 rates, 2 tokens neighbours, and 2048 tokens (1024 was the most tried, and best)
    assert chain.checks()[1][(LSTM, 1e13)].planned == 6
    assert found[(LSTM, 1e13)].gain == pytest.approx(0.05) and found[(LSTM, 1e11)].held
    assert "| lstm | 1e+13 | lr x 2, 501 tokens | 1.4500 | lr x 2, 1013 tokens | 1.4000 | moved: 0.0500 | 6 of 6 |" in markdown(found)
    assert "| lstm | 1e+11 | lr x 2, 501 tokens | 1.8000 | lr x 1, 501 tokens | 1.7950 | held (0.0050 ≤ 0.01) | 3 of 3 |" in markdown(found)

    (base, base_overrides), (moved, moved_overrides) = chain.sizes()
    assert base == "frontier_tuned_sizes" and f"tune.per_family={{{LSTM}:{{lr_scale:2,tokens_per_step:501}}}}" in base_overrides
    assert "budget.flops=1e11,1e12" in base_overrides  # not 1e13, where the check moved the setting
    assert moved == "frontier_tuned_sizes_1e13" and "budget.flops=1e13" in moved_overrides
    assert f"tune.per_family={{{LSTM}:{{lr_scale:2,tokens_per_step:1013}}}}" in moved_overrides

    n = 0
    for sweep, tier, grid_tokens, size, loss in [("frontier_tuned_sizes", 1e12, 512, "s", 1.0), ("frontier_tuned_sizes", 1e12, 512, "l", 2.0),
                                                  ("frontier_tuned_sizes", 1e13, 512, "s", 1.0), ("frontier_tuned_sizes", 1e13, 512, "l", 2.0),
                                                  ("frontier_tuned_sizes_1e13", 1e13, 1024, "s", 1.6), ("frontier_tuned_sizes_1e13", 1e13, 1024, "l", 1.5)]:
        d = job(tmp_path / sweep, n, LSTM, 2, grid_tokens, loss=loss, budget=tier, **shakespeare)
        metrics = json.loads((d / "metrics.json").read_text())
        (d / "metrics.json").write_text(json.dumps({**metrics, "tune/size": size}))
        n += 1
    seeds = dict(chain.seeds())
    assert f"tune.per_family={{{LSTM}:{{lr_scale:2,tokens_per_step:501,size:s}}}}" in seeds["frontier_tuned_seeds_1e12"]
    assert f"tune.per_family={{{LSTM}:{{lr_scale:2,tokens_per_step:1013,size:l}}}}" in seeds["frontier_tuned_seeds_1e13"]
    ((_, top),) = chain.top()[:1]
    assert f"tune.per_family={{{LSTM}:{{lr_scale:2,tokens_per_step:1013,size:l}}}}" in top


def test_the_top_tier_runs_each_family_at_the_size_chosen_at_the_highest_tier_with_three_seeds(tmp_path):
    # bugs caught: the size taken from a lower tier's choice (or the searched size), one seed, or the
    # tier not beyond the frontier's highest; --top-families ignored; every seed in one sweep (which runs
    # one family's seeds before the next family, so a chain stopped half-way leaves families with none)
    grid(tmp_path / "tune_frontier", LSTM, [1, 2], [256, 512], {(2, 512): 1.5}, corpus="shakespeare", heldout=True)
    grid(tmp_path / "tune_frontier", GPT, [1, 2], [256, 512], {(1, 256): 1.6}, start=4, corpus="shakespeare", heldout=True)
    sizes = tmp_path / "frontier_tuned_sizes"
    n = 0
    for family, lr, tokens in ((LSTM, 2, 512), (GPT, 1, 256)):  # each at its tuned setting, as the final runs train
        for budget, size, loss in [(1e12, "s", 1.0), (1e12, "l", 2.0), (1e13, "s", 2.0), (1e13, "l", 1.0)]:
            d = job(sizes, n, family, lr, tokens, loss=loss, budget=budget, corpus="shakespeare", heldout=True)
            metrics = json.loads((d / "metrics.json").read_text())
            (d / "metrics.json").write_text(json.dumps({**metrics, "tune/size": size}))
            n += 1
    chain = Chain("tune_frontier", tmp_path)
    (first, first_overrides), (second, second_overrides), (third, third_overrides) = chain.top()
    # three seeds, as at the frontier's tiers (final_cells.TOP_SEEDS); two could never call a gap
    assert (first, second, third) == ("frontier_tuned_top_1e14_seed1234", "frontier_tuned_top_1e14_seed2",
                                      "frontier_tuned_top_1e14_seed3")
    assert "seed=1234" in first_overrides and "seed=2" in second_overrides and "seed=3" in third_overrides
    for overrides in (first_overrides, second_overrides, third_overrides):
        assert "budget.flops=1e14" in overrides
        assert f"tune.per_family={{{LSTM}:{{lr_scale:2,tokens_per_step:501,size:l}},{GPT}:{{lr_scale:1,tokens_per_step:245,size:l}}}}" in overrides
    chain.top_families = (GPT,)
    (_, overrides), *_ = chain.top()
    assert f"preset=frontier/shakespeare/{GPT}" in overrides and LSTM not in overrides[-1]


def test_the_dry_run_before_the_search_has_started_says_every_later_step_waits(tmp_path, capsys):
    # bug caught: "every search directory done" read over no directory at all (all([]) is true), so the
    # first look at where the chain stands, before the search began, computed the edges from a search
    # that does not exist and stopped with "is not a directory"
    assert main(["tune_frontier_ptb", "--dry-run", "--root", str(tmp_path), "--archive", "none"]) == 0
    out = capsys.readouterr().out
    assert "tune_frontier_ptb [to run]" in out and "# edges: waits for the steps before it" in out


def test_the_dry_run_lists_the_untuned_step_once_the_search_is_done_and_the_final_cells_only_after_the_edges(tmp_path, capsys):
    # bugs caught: the untuned recipes shown as waiting for the grid's extension (they read only the
    # search); the final cells computed while the extension is still running (from the base grid
    # alone, so the dry run would name settings the chain will not run); the seeds computed before the sizes ran (the dry run stopped: "... is not a directory")
    base = tmp_path / "tune_frontier_ptb"
    grid(base, LSTM, [1, 2, 4], [256, 512], {(4, 256): 5.0})  # the best on the grid's edge: an extension
    OmegaConf.save({"hydra": {"overrides": {"task": ["experiment=tune_frontier_ptb"]},
                              "sweeper": {"params": {"preset": f"frontier/ptb/{LSTM}", "budget.flops": "1e12",
                                                     "tune.lr_scale": "1,2,4", "tune.tokens_per_step": "256,512"}}}},
                   base / "multirun.yaml")
    (base / DONE).write_text("done\n")
    (tmp_path / "tune_frontier_ptb_edge_tokens").mkdir()  # the extension running
    assert main(["tune_frontier_ptb", "--dry-run", "--root", str(tmp_path), "--archive", "none"]) == 0
    out = capsys.readouterr().out
    assert "tune_frontier_ptb_untuned [to run]" in out and "tune_frontier_ptb_edge_lr [to run]" in out
    assert "# sizes: waits for the steps before it" in out
    for name in ("tune_frontier_ptb_edge_tokens", "tune_frontier_ptb_edge_lr"):
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / DONE).write_text("done\n")
    assert main(["tune_frontier_ptb", "--dry-run", "--root", str(tmp_path), "--archive", "none"]) == 0
    out = capsys.readouterr().out
    assert "frontier_ptb_tuned_sizes [to run]" in out and "# seeds: waits for the steps before it" in out


def test_a_size_whose_run_diverged_after_its_best_validation_is_not_the_one_seeded(tmp_path):
    # bug caught: the size selection read a run whose loss blew up (metrics.json: null, as seqbench.training.run
    # writes NaN) as completed, so a tuned rate too high for the large size could still pick that size,
    # and its seeds 2 and 3 would be spent on a setting that diverges
    from seqbench.protocol.final_cells import chosen_sizes
    from seqbench.training.record import read_runs
    from seqbench.training.record import write_metrics

    sizes = tmp_path / "frontier_tuned_sizes"
    for n, (size, loss, last) in enumerate([("s", 1.6, 1.6), ("l", 1.4, math.nan)]):
        d = job(sizes, n, LSTM, 1, None, finished=False, corpus="shakespeare", heldout=True)
        write_metrics(d / "metrics.json", {"status": "completed", "val/loss_best": loss, "val/loss": last,
                                           "train/loss": last, "budget/flops": 1e12, "tune/size": size})
    assert chosen_sizes(read_runs([sizes])) == {(LSTM, 1e12): "s"}


def test_a_sweep_stopped_by_a_signal_is_not_launched_again_nor_given_up_on(tmp_path, monkeypatch):
    # bug caught: a launcher stopped on purpose (SIGTERM) read as a failure to retry, so the sweep a
    # person stopped starts again, and after three stops its failed jobs are given up on as "done"
    train = tmp_path / "train.py"
    train.write_text(FAKE_TRAIN)
    monkeypatch.setenv("OUTCOMES", "completed,failed")
    monkeypatch.setenv("STOPPED", "1")
    assert not run_sweep(tmp_path, "s", [], 1, [], log=lambda *_: None, train=str(train))
    assert len((tmp_path / "s" / "launches.txt").read_text().splitlines()) == 1 and not (tmp_path / "s" / DONE).exists()


def test_a_mistyped_top_family_is_refused_before_anything_runs(tmp_path, capsys):
    # bug caught: `--top-families lstmm` accepted, leaving the top step with nothing to run, silently
    with pytest.raises(SystemExit) as stop:
        main(["tune_frontier", "--root", str(tmp_path), "--top-families", f"{LSTM}m", "--dry-run"])
    assert stop.value.code == 2 and f"{LSTM}m is not a compared family" in capsys.readouterr().err


def test_the_chain_reads_a_sweep_again_only_after_a_job_of_it_finished(tmp_path, monkeypatch):
    # bugs caught: every step of the dry run reading the search's few hundred runs again (a cost report
    # took over 16 minutes on a loaded machine); the other way, a cached read kept after a job finished,
    # so the chain would compute the next step from runs that are no longer all there are
    import seqbench.training.record

    grid(tmp_path / "tune_frontier", LSTM, [1, 2], [256, 512], {(2, 512): 1.5}, corpus="shakespeare", heldout=True)
    reads = []
    real = seqbench.training.record.read_runs
    monkeypatch.setattr(seqbench.training.record, "read_runs", lambda dirs: reads.append(dirs) or real(dirs))
    chain = Chain("tune_frontier", tmp_path)
    first = chain.transfer()
    assert chain.transfer() == first and len(reads) == 1
    job(tmp_path / "tune_frontier", 4, LSTM, 4, 512, loss=1.2, corpus="shakespeare", heldout=True)  # a job finishes
    assert f"tune.lr_scale=2,4,8" in chain.transfer()[0][1] and len(reads) == 2


def _rate_check(tmp_path, losses: dict[float, float], tier=1e13, tokens=512, start=0, status=None):
    """The transfer check's rate trials of the LSTM at one tier of the Tiny Shakespeare chain (its tuned
    setting: lr x 2 at 501 tokens held), one job each, in the sweep the chain names for each rate."""
    from seqbench.protocol.final_cells import flops_text

    for n, (lr, loss) in enumerate(losses.items(), start):
        first = lr in (1, 2, 4)
        sweep = (f"tune_frontier_transfer_{flops_text(tier)}_{LSTM}" if first else
                 f"tune_frontier_transfer_lr_{flops_text(tier)}_{LSTM}_{lr:g}")
        shutil.rmtree(tmp_path / sweep / str(n if first else 0), ignore_errors=True)  # a trial written again
        job(tmp_path / sweep, n if first else 0, LSTM, lr, tokens, loss=loss, budget=tier, corpus="shakespeare",
            heldout=True, status=(status or {}).get(lr, "completed"))


def test_a_check_whose_best_rate_is_the_lowest_or_highest_tried_goes_one_rate_further_until_it_is_inside(tmp_path):
    # bugs caught: a tier's setting moved to the edge of the three rates checked and left there (every
    # family the first check moved sat on its lowest rate: PTB's LSTM and GRU, Tiny Shakespeare's RNN, GRU
    # and minLSTM); a rate added before the three first trials finished, at one of them, past a rate that
    # diverged, or without end; the check called complete (and its move taken) while an added rate is
    # still to run; the added trial left out of the check's choice
    grid(tmp_path / "tune_frontier", LSTM, [1, 2, 4], [256, 512, 1024], {(2, 512): 1.5}, corpus="shakespeare", heldout=True)
    chain = Chain("tune_frontier", tmp_path)

    def added(tier="1e13") -> list[tuple[str, list[str]]]:
        return [(name, o) for name, o in chain.transfer() if name.startswith(f"tune_frontier_transfer_lr_{tier}_")]

    _rate_check(tmp_path, {1: 1.40, 2: 1.45})  # lr x 4 has not run yet: no best known
    assert added() == []
    _rate_check(tmp_path, {4: 1.50}, start=2)
    ((name, overrides),) = added()
    assert name == f"tune_frontier_transfer_lr_1e13_{LSTM}_0.5"
    assert overrides[-2:] == ["tune.lr_scale=0.5", "tune.tokens_per_step=501"] and "budget.flops=1e13" in overrides
    assert chain.checks()[1][(LSTM, 1e13)].planned == 3 + 2 + 1 and not chain.checks()[1][(LSTM, 1e13)].complete
    _rate_check(tmp_path, {0.5: 1.38})  # better again, and the lowest: one more
    assert [n.rsplit("_", 1)[1] for n, _ in added()] == ["0.25", "0.5"]
    _rate_check(tmp_path, {0.25: 1.39})  # the best lies inside now: nothing more
    assert [n.rsplit("_", 1)[1] for n, _ in added()] == ["0.25", "0.5"]
    tuned, found = chain.checks()
    assert found[(LSTM, 1e13)].chosen == {"lr_scale": 0.5, "tokens_per_step": 501}
    _rate_check(tmp_path, {0.25: 1.30, 0.125: 1.2})  # at most EXTENSIONS (3) rates beyond the first three
    assert [n.rsplit("_", 1)[1] for n, _ in added()] == ["0.125", "0.25", "0.5"]
    # upwards, and never past a rate that diverged (at 1e11 the best is the highest, then x 8 blows up)
    _rate_check(tmp_path, {1: 1.9, 2: 1.85, 4: 1.8}, tier=1e11)
    assert [n.rsplit("_", 1)[1] for n, _ in added("1e11")] == ["8"]
    _rate_check(tmp_path, {8: 1.0}, tier=1e11, status={8: "diverged"})
    assert [n.rsplit("_", 1)[1] for n, _ in added("1e11")] == ["8"]


def _tokens_check(tmp_path, losses: dict[int, float], tier=1e13, status=None):
    """The LSTM's transfer trials at its tuned rate (lr x 2) on the tokens axis, each in the sweep the chain
    names for it: the tuned 501 tokens (the rate sweep's middle job), the grid's neighbours 256 and 1024
    (the tokens sweep) and the added values (one sweep each)."""
    from seqbench.protocol.final_cells import flops_text

    t = flops_text(tier)
    for tokens, loss in losses.items():
        sweep, n = ((f"tune_frontier_transfer_{t}_{LSTM}", 1) if tokens == 501 else
                    (f"tune_frontier_transfer_tokens_{t}_{LSTM}", [256, 1024].index(tokens)) if tokens in (256, 1024)
                    else (f"tune_frontier_transfer_tokens_{t}_{LSTM}_{tokens}", 0))
        shutil.rmtree(tmp_path / sweep / str(n), ignore_errors=True)
        job(tmp_path / sweep, n, LSTM, 2, tokens, loss=loss, budget=tier, corpus="shakespeare", heldout=True,
            status=(status or {}).get(tokens, "completed"))


def test_a_check_whose_best_tokens_are_the_most_tried_doubles_them_until_it_is_inside(tmp_path):
    # bugs caught: a tier's setting moved to the most tokens per step checked and left there (PTB's minGRU
    # and minLSTM at 1e13 on the H200: 512 against the tuned 245, by up to 0.11 nats); tokens added before
    # the tuned value and its neighbours finished, past a value that diverged, or without end; the added
    # trial left out of the check's choice or of its planned trials
    grid(tmp_path / "tune_frontier", LSTM, [1, 2, 4], [256, 512, 1024], {(2, 512): 1.5}, corpus="shakespeare", heldout=True)
    chain = Chain("tune_frontier", tmp_path)

    def added(tier="1e13") -> list[int]:
        prefix = f"tune_frontier_transfer_tokens_{tier}_{LSTM}_"
        return [int(name.removeprefix(prefix)) for name, _ in chain.transfer() if name.startswith(prefix)]

    for lr, n in ((1, 0), (4, 2)):  # the rate sweep's other trials: worse, so no rate is added
        job(tmp_path / f"tune_frontier_transfer_1e13_{LSTM}", n, LSTM, lr, 501, loss=2.0, budget=1e13,
            corpus="shakespeare", heldout=True)
    _tokens_check(tmp_path, {501: 1.5, 256: 1.6})  # 1024 has not run yet: no best known
    assert added() == []
    _tokens_check(tmp_path, {1024: 1.4})
    assert added() == [2048]
    assert dict(chain.transfer())[f"tune_frontier_transfer_tokens_1e13_{LSTM}_2048"][-2:] == [
        "tune.lr_scale=2", "tune.tokens_per_step=2048"]
    assert not chain.checks()[1][(LSTM, 1e13)].complete  # the added trial is planned: nothing moves before it
    _tokens_check(tmp_path, {2048: 1.3})
    assert added() == [2048, 4096]
    _tokens_check(tmp_path, {4096: 1.35})  # the best lies inside now: nothing more
    assert added() == [2048, 4096]
    check = chain.checks()[1][(LSTM, 1e13)]
    assert check.complete and check.chosen == {"lr_scale": 2, "tokens_per_step": 2048 - 11}
    _tokens_check(tmp_path, {4096: 1.2, 8192: 1.1})  # at most EXTENSIONS (3) doublings past the neighbours
    assert added() == [2048, 4096, 8192]
    # never past a value that diverged
    _tokens_check(tmp_path, {501: 1.5, 256: 1.6, 1024: 1.4}, tier=1e11)
    assert added("1e11") == [2048]
    _tokens_check(tmp_path, {2048: 1.0}, tier=1e11, status={2048: "diverged"})
    assert added("1e11") == [2048]


def test_the_chain_runs_the_rate_a_check_adds_in_the_same_call(tmp_path, monkeypatch):
    # bug caught: the transfer step's sweeps computed once, before its trials ran, so the rate a check adds
    # would run only when a person restarted the chain, after the sizes had been run at the edge's setting
    grid(tmp_path / "tune_frontier", LSTM, [1, 2, 4], [256, 512, 1024], {(2, 512): 1.5}, corpus="shakespeare", heldout=True)
    for name in ("tune_frontier", "tune_frontier_edge_tokens", "tune_frontier_edge_lr"):
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / DONE).write_text("")
    launched = []

    def launch(root, name, overrides, *args, **kwargs):
        launched.append(name)
        lrs = [float(v) for o in overrides if o.startswith("tune.lr_scale=") for v in o.split("=", 1)[1].split(",")]
        tokens = [int(v) for o in overrides if o.startswith("tune.tokens_per_step=") for v in o.split("=", 1)[1].split(",")]
        tier = float(next(o for o in overrides if o.startswith("budget.flops=")).split("=", 1)[1])
        n = 0
        for lr in lrs:
            for t in tokens:  # the lowest rate is always the best: the check goes down to lr x 2 / 16
                job(root / name, n, LSTM, lr, t + 11, loss=1.0 + lr / 10, budget=tier, corpus="shakespeare", heldout=True)
                n += 1
        (root / name / DONE).write_text("")
        return True

    monkeypatch.setattr("seqbench.protocol.campaign.run_sweep", launch)
    assert main(["tune_frontier", "--root", str(tmp_path), "--steps", "transfer", "--archive", "none"]) == 0
    assert [n for n in launched if n.startswith("tune_frontier_transfer_lr_1e13")] == [
        f"tune_frontier_transfer_lr_1e13_{LSTM}_{r}" for r in ("0.5", "0.25", "0.125")]
    assert len(launched) == len(set(launched))  # each sweep launched once


def test_sweeps_at_once_runs_a_rounds_sweeps_side_by_side_and_each_to_its_end(tmp_path, monkeypatch):
    # bug caught: --sweeps-at-once accepted but the round still run one sweep after another (a GPU session
    # would spend its minutes on a transfer check's two or three jobs at a time), or one sweep that stops
    # cancelling the others of its round
    import threading

    grid(tmp_path / "tune_frontier", LSTM, [1, 2, 4], [256, 512, 1024], {(2, 512): 1.5}, corpus="shakespeare", heldout=True)
    for name in ("tune_frontier", "tune_frontier_edge_tokens", "tune_frontier_edge_lr"):
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / DONE).write_text("")
    together = threading.Barrier(2, timeout=20)  # the first two sweeps of the round must be in flight at once
    launched = []

    def launch(root, name, overrides, *args, **kwargs):
        launched.append(name)
        if len(launched) <= 2:
            together.wait()
        return "tokens" not in name  # the tokens sweep stops; its neighbours still end

    monkeypatch.setattr("seqbench.protocol.campaign.run_sweep", launch)
    assert main(["tune_frontier", "--root", str(tmp_path), "--steps", "transfer", "--archive", "none",
                 "--sweeps-at-once", "4"]) == 1
    assert sorted(launched) == sorted(n for n, _ in Chain("tune_frontier", tmp_path).transfer())
    assert any("tokens" in n for n in launched) and len(launched) > 2


def test_the_size_sweeps_train_each_cell_once_at_its_own_setting():
    # bug caught: one first sweep over every tier (a Hydra sweep is a cartesian product) trained the cells
    # the transfer check had moved at the tuned setting too, to be passed over: 24 wasted runs on Tiny
    # Shakespeare, 15 of them at 1e13
    from seqbench.protocol.chain import parse_commands
    from seqbench.protocol.campaign_cost import sweep_jobs
    from seqbench.protocol.final_cells import Experiment, final_commands

    tuned = {LSTM: {"lr_scale": 2, "tokens_per_step": 512}, GPT: {"lr_scale": 1, "tokens_per_step": 256}}
    moved = {(GPT, 1e13): {"lr_scale": 1, "tokens_per_step": 1024}}
    sweeps = dict(parse_commands(final_commands(tuned, Experiment("tune_frontier"), moved=moved)))
    assert set(sweeps) == {"frontier_tuned_sizes", "frontier_tuned_sizes_1e13"}
    assert "budget.flops=1e11,1e12" in sweeps["frontier_tuned_sizes"]
    top = sweeps["frontier_tuned_sizes_1e13"]
    assert f"tune.per_family={{{LSTM}:{{lr_scale:2,tokens_per_step:512}},{GPT}:{{lr_scale:1,tokens_per_step:1024}}}}" in top
    cells = [job for overrides in sweeps.values() for job in sweep_jobs(overrides)]
    assert sorted(set(cells)) == sorted((f, t) for f in (LSTM, GPT) for t in (1e11, 1e12, 1e13))
    assert len(cells) == 2 * 3 * len(Experiment("tune_frontier").grid)  # each (family, tier) at each size of the grid, once
