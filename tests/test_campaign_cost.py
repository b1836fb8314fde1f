"""The chain's cost (`python -m seqbench.protocol.campaign <experiment> --dry-run`, `seqbench.protocol.campaign_cost`):
runs counted as Hydra's sweeper expands them, finished apart from remaining, measured wall time of the
completed jobs only, and each remaining run estimated from its own family at the nearest measured tier."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from seqbench.protocol.campaign_cost import rows, rule_jobs, sweep_jobs
from seqbench.protocol.campaign import main
from seqbench.protocol.chain import DONE, Chain, parse_commands
from seqbench.families import compared
from seqbench.protocol.final_cells import TOP_SEEDS, Experiment, command, final_commands
from seqbench.reports.ledger import read_record
from test_tuning_record import GPT, LSTM, job

SHAKESPEARE = {"corpus": "shakespeare", "heldout": True}


def test_a_sweep_expands_into_the_experiment_grid_with_the_command_line_winning():
    # bugs caught: the experiment's own hydra.sweeper.params left out (the search would count one job per
    # family, not its 20 grid points), or a command-line axis added to the experiment's rather than
    # replacing it (the edge sweep lr x 8 counted as 6 rates)
    families = len(compared())
    assert len(sweep_jobs(["experiment=tune_frontier_ptb"])) == families * 5 * 4
    assert Counter(sweep_jobs(["experiment=tune_frontier_ptb", "tune.lr_scale=8"])) == Counter(
        {(f, 1e12): 4 for f in compared()})


def test_the_protocol_s_rule_counts_what_the_sweeps_it_stands_for_will_run():
    # bugs caught: a rule that drifts from the commands the chain will run (sizes counted without the
    # size axis; top at the highest tier rather than 10 x it, or for every family despite --top-families)
    experiment = Experiment("tune_frontier")
    tuned = {f: {"lr_scale": 1, "tokens_per_step": 245} for f in compared()}
    (sizes,) = parse_commands(final_commands(tuned, experiment))
    assert Counter(sweep_jobs(sizes[1])) == Counter(rule_jobs("sizes", experiment, compared(), (), 1e12))
    top = {f: {**tuned[f], "size": "l"} for f in (LSTM, GPT)}
    ((_, overrides),) = parse_commands([command("frontier_tuned_top_1e14", experiment, [1e14], ",".join(["1234", *map(str, range(2, TOP_SEEDS + 1))]), top)])
    assert Counter(sweep_jobs(overrides)) == Counter(rule_jobs("top", experiment, compared(), (LSTM, GPT), 1e12))


def test_finished_jobs_are_not_remaining_and_only_completed_jobs_count_their_wall_time(tmp_path):
    # bugs caught: a finished job counted as remaining; the wall time of a failed job (it runs again) or
    # of a running one summed into what was spent; a sweep marked done still showing remaining runs
    base = tmp_path / "tune_frontier_ptb"
    for n, lr in enumerate([0.25, 0.5, 1]):
        job(base, n, LSTM, lr, 256, wall=10.0)
    job(base, 3, LSTM, 2, 256, status="failed", wall=5.0)
    job(base, 4, LSTM, 4, 256, finished=False)  # running
    for later in ("tune_frontier_ptb_untuned", "tune_frontier_ptb_transfer_1e13_lstm", "frontier_ptb_tuned_sizes_1e13"):
        job(tmp_path / later, 0, LSTM, 1, 256, wall=7.0)  # the later steps' sweeps, named after the search's
    chain = Chain("tune_frontier_ptb", tmp_path)
    (search,) = rows(chain, ["search"])
    planned = 20 * len(compared())
    # bug caught: every sweep whose name begins with the search's counted as the search (256 finished of 160)
    assert (search.planned, search.finished, search.remaining, search.measured_s) == (planned, 3, planned - 3, 30.0)
    assert rows(chain, ["sizes"])[0].finished == 1  # a moved tier's size sweep is the sizes step's
    assert LSTM not in search.unmeasured and search.unmeasured[GPT] == 20  # no silent zero for a family never run
    (base / DONE).write_text("2026-11-27T00:00:00Z\n")
    (search,) = rows(chain, ["search"])
    assert (search.finished, search.remaining, search.estimated_s) == (3, 0, 0.0)


def _chain_with_runs(tmp_path) -> Chain:
    """Tiny Shakespeare: LSTM searched at 1e12 (its tuned tokens per step cost 1e-11 s/FLOP, its other
    grid points 100 times that) with one size run at 1e13 (5e-12 s/FLOP); GPT at 4e-11 s/FLOP at 1e12."""
    base = tmp_path / "tune_frontier"
    for n, (lr, tokens) in enumerate([(1, 256), (1, 512), (2, 256), (2, 512)]):
        job(base, n, LSTM, lr, tokens, loss=1.5 if (lr, tokens) == (2, 512) else 7.0,
            wall=10.0 if tokens == 512 else 1000.0, **SHAKESPEARE)
        job(base, n + 4, GPT, lr, tokens, loss=1.6, wall=40.0, **SHAKESPEARE)
    (base / DONE).write_text("done\n")
    job(tmp_path / "frontier_tuned_sizes", 0, LSTM, 1, None, budget=1e13, wall=50.0, **SHAKESPEARE)
    return Chain("tune_frontier", tmp_path)


def test_each_remaining_run_is_estimated_from_its_own_family_at_the_nearest_measured_tier(tmp_path):
    # bugs caught: a 1e13 run scaled from the 1e12 trials when 1e13 runs exist (LSTM's 1e13 seeds would
    # cost 200 s, not 100); one family's seconds per FLOP used for another (GPT's, 4x LSTM's); the
    # search's trials at other tokens per step than the tuned one taken as the tuned setting's cost
    chain = _chain_with_runs(tmp_path)
    (seeds,) = rows(chain, ["seeds"])  # waits for the size runs: counted by the rule, every family x tier x 2
    lstm = 2 * (1 + 10 + 50)   # 1e11 and 1e12 from the 1e12 trials, 1e13 from the 1e13 run
    gpt = 2 * (4 + 40 + 400)   # 1e13 from 1e12: GPT has no 1e13 run
    assert seeds.basis == "the protocol's rule" and seeds.remaining == 6 * len(compared())
    assert seeds.estimated_s == pytest.approx(lstm + gpt)
    assert seeds.unmeasured == Counter({f: 6 for f in compared() if f not in (LSTM, GPT)})


def test_the_top_step_counts_only_the_top_families_at_ten_times_the_highest_tier(tmp_path):
    # bugs caught: --top-families ignored by the count (every family's seeds), or the top runs
    # costed at the highest tier rather than 10 x it (LSTM: 5e-12 s/FLOP x 1e14 = 500 s a seed)
    chain = _chain_with_runs(tmp_path)
    chain.top_families = (LSTM,)
    (top,) = rows(chain, ["top"])
    assert (top.planned, top.remaining, top.unmeasured) == (TOP_SEEDS, TOP_SEEDS, Counter())
    assert top.estimated_s == pytest.approx(500.0 * TOP_SEEDS)


def test_the_cost_report_is_written_with_its_record_and_runs_nothing(tmp_path, capsys, monkeypatch):
    # bugs caught: --cost-report launching the chain (it reads; it never trains), or cost.md written
    # without the ledger record (machine, date, command) that makes its numbers comparable
    def launch(*args, **kwargs):
        raise AssertionError(f"--cost-report launched a sweep: {args}")

    monkeypatch.setattr("seqbench.protocol.campaign.run_sweep", launch)
    job(tmp_path / "tune_frontier_ptb", 0, LSTM, 1, 256, wall=3600.0)
    assert main(["tune_frontier_ptb", "--root", str(tmp_path), "--cost-report", str(tmp_path / "cost")]) == 0
    (record,) = read_record(tmp_path / "cost" / "record.json", tmp_path)
    assert record.files == ("cost.md",) and "--cost-report" in record.command
    text = (tmp_path / "cost" / "cost.md").read_text()
    assert f"| search | {20 * len(compared())} | 1 | {20 * len(compared()) - 1} | 1.00 |" in text
    assert text.split("# The tuning chain's cost: tune_frontier_ptb\n\n")[1].strip() in capsys.readouterr().out


def test_the_tier_beyond_is_estimated_from_the_size_chosen_at_the_highest_tier(tmp_path):
    # bugs caught: every size's runs pooled into a family's seconds per FLOP, so the 1e14 runs of the LSTM
    # (size m chosen at 1e13) were costed at the slow size s's rate too: (50 + 50 + 500 + 500) s / 4e13
    # FLOPs x 1e14 = 2,750 s a seed, not m's 5e-12 x 1e14 = 500 s; the size chosen among runs at any setting
    # (s, by a run at lr x1 that is not the LSTM's setting: 5e-11 x 1e14 = 5,000 s a seed), not as Chain.top
    # chooses it; the other steps, which train every size, costed at the chosen size's rate
    chain = _chain_with_runs(tmp_path)  # LSTM tuned at lr x2, 512 tokens; its 1e13 size run: m at lr x1, 50 s
    sizes = tmp_path / "frontier_tuned_sizes"
    job(sizes, 1, LSTM, 2, 512, budget=1e13, wall=50.0, loss=6.0, size="m", **SHAKESPEARE)
    job(sizes, 2, LSTM, 2, 512, budget=1e13, wall=500.0, loss=6.5, size="s", **SHAKESPEARE)
    job(sizes, 3, LSTM, 1, None, budget=1e13, wall=500.0, loss=5.0, size="s", **SHAKESPEARE)
    chain.top_families = (LSTM,)
    (top,) = rows(chain, ["top"])
    assert top.estimated_s == pytest.approx(500.0 * TOP_SEEDS)
    (seeds,) = rows(chain, ["seeds"])  # by the rule: two seeds a tier; 1e13 at m's rate, the chosen size
    assert seeds.estimated_s == pytest.approx(2 * (1 + 10) + 2 * 50 + 2 * (4 + 40 + 400), rel=1e-6)
    # the transfer check trains the searched size, not the chosen one: the pooled rate, (50 + 50 + 500 + 500) s
    # / 4e13 FLOPs at 1e13; four trials a family (its rate and the rate and tokens neighbours the grid has)
    # at each tier but the searched 1e12
    (transfer,) = rows(chain, ["transfer"])
    assert transfer.estimated_s == pytest.approx(4 * (1 + 275) + 4 * (4 + 400), rel=1e-6)
