"""The compute-efficient frontier of seqbench.reports.report on synthetic sweep directories (seqbench.reports.frontier)."""

from __future__ import annotations

import json
import statistics

import pytest

from seqbench.reports import frontier, report
from seqbench.training import record


def _job(sweep, name, family, params, budget, curve, seed=1):
    """A finished job whose history holds (train/flops, val/loss) at each validation."""
    job = sweep / name
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "hydra.yaml").write_text(
        f"hydra:\n  runtime:\n    choices:\n      model: m\n      family: frontier/shakespeare/{family}\n")
    metrics = {"status": "completed", "params": params + 100, "params_non_embedding": params,
               "budget/flops": budget, "train/flops": curve[-1][0], "val/ppl": 2.0, "seed": seed}
    (job / "metrics.json").write_text(json.dumps(metrics))
    (job / "csv").mkdir()
    rows = ["epoch,step,train/loss,val/loss,val/ppl,curve/tokens,curve/train_time_s,train/flops"]
    for i, (flops, loss) in enumerate(curve):
        rows.append(f"0,{i * 10},2.0,,,,,")  # a training row: no validation, ignored
        rows.append(f"0,{i * 10 + 9},,{loss},2.0,{(i + 1) * 100},{flops / 1e9},{flops}")
    (job / "csv" / "metrics.csv").write_text("\n".join(rows) + "\n")


def _sweep(tmp_path):
    """lstm wins at 1e12 (its small model is better early); gpt's large model wins at 1e13 and 1e14."""
    s = tmp_path / "sweep"
    _job(s, "0", "lstm", 10_000, 1e12, [(5e11, 2.0), (1e12, 1.8)], seed=1)
    _job(s, "1", "lstm", 10_000, 1e12, [(5e11, 2.2), (1e12, 1.6)], seed=2)  # mean 2.1, 1.7
    _job(s, "2", "lstm", 100_000, 1e14, [(1e13, 1.75), (5e13, 1.5), (1e14, 1.45)])
    _job(s, "3", "gpt", 10_000, 1e12, [(5e11, 2.5), (1e12, 2.0)])
    _job(s, "4", "gpt", 100_000, 1e14, [(1e12, 2.2), (3e12, 1.9), (1e13, 1.6), (1e14, 1.2)])
    _job(s, "5", "gpt", 1_000_000, 1e14, [(1e13, 2.6), (1e14, 1.3)])  # larger, worse within this budget
    return s


def test_envelope_is_the_lowest_loss_reached_within_each_budget(tmp_path):
    cfgs = frontier.configs(record.read_runs([_sweep(tmp_path)]))
    lstm = frontier.by_family(cfgs)["lstm"]
    env = frontier.envelope(lstm)
    # the two seeds of the 1e12 configuration are averaged; the frontier only ever goes down
    assert [(x, round(y, 3)) for x, y, _, _ in env] == [(5e11, 2.1), (1e12, 1.7), (5e13, 1.5), (1e14, 1.45)]
    loss, cfg, point = frontier.best_at(env, 1e13)
    assert loss == pytest.approx(1.7) and cfg.params == 10_000  # the 1e13 point of the large model is worse
    assert point["sd"] == pytest.approx(statistics.stdev([1.8, 1.6])) and point["n"] == 2
    assert frontier.best_at(env, 1e11) is None


def test_table_names_the_winner_per_budget_and_the_crossover(tmp_path):
    result = report.write_report(record.read_runs([_sweep(tmp_path)]), tmp_path / "out")
    rows = result["frontier"]["rows"]
    assert [b for b, _, _ in rows] == [1e12, 1e14]  # the budget tiers of the runs
    assert [w for _, _, w in rows] == ["lstm", "gpt"]
    # gpt's frontier first drops below lstm's 1.7 at its 1e13 validation (1.6)
    assert result["frontier"]["crossovers"] == [("lstm", "gpt", 1e13)]
    text = result["frontier"]["table"]
    assert "gpt overtakes lstm at ≈ 1.00e+13" in text
    assert f"1.700 ± {statistics.stdev([1.8, 1.6]):.3f} (0.01M, n=2)" in text
    page = (tmp_path / "out" / "report.md").read_text()
    assert "## Compute-efficient frontier" in page
    for name in ("loss_vs_flops.png", "loss_vs_time.png"):
        assert (tmp_path / "out" / name).read_bytes()[:4] == b"\x89PNG" and name in page


def test_the_time_table_reads_the_frontier_at_seconds_of_training(tmp_path):
    # _job writes train_time_s = flops / 1e9: lstm's 1e12 configuration validates at 500 s and 1,000 s,
    # gpt's 0.1M one at 1,000 s ... 100,000 s
    runs = record.read_runs([_sweep(tmp_path)])
    result = report.write_report(runs, tmp_path / "out", time_budgets=[1000, 20_000])
    rows = result["frontier"]["time_rows"]
    assert [(b, w) for b, _, w in rows] == [(1000, "lstm"), (20_000, "gpt")]
    assert rows[1][1]["gpt"][0] == pytest.approx(1.6) and rows[1][1]["lstm"][0] == pytest.approx(1.7)
    assert "| 1,000 | " in result["frontier"]["time_table"]
    assert "gpt overtakes lstm at ≈ 10,000 s of training" in result["frontier"]["time_table"]
    # the default: the decades the runs span, then the longest run's end
    _, rows, _ = frontier.table(frontier.configs(runs), x="time")
    assert [b for b, _, _ in rows] == [1000, 10_000, 100_000]


def test_one_winner_everywhere_has_no_crossover_and_budgets_can_be_chosen(tmp_path):
    s = tmp_path / "s"
    _job(s, "0", "gru", 10_000, 1e13, [(1e12, 2.0), (1e13, 1.5)])
    _job(s, "1", "rnn", 10_000, 1e13, [(1e12, 2.4), (1e13, 1.9)])
    text, rows, cross = frontier.table(frontier.configs(record.read_runs([s])), budgets=[1e12, 1e13])
    assert [w for _, _, w in rows] == ["gru", "gru"] and cross == []
    assert "No crossover" in text


def test_runs_without_flops_leave_the_report_as_it_was(tmp_path):
    s = tmp_path / "s"
    _job(s, "0", "gru", 10_000, None, [(1e12, 2.0)])
    history = s / "0" / "csv" / "metrics.csv"
    history.write_text(history.read_text().replace("train/flops", "other"))
    result = report.write_report(record.read_runs([s]), tmp_path / "out")
    assert result["frontier"] is None and "frontier" not in (tmp_path / "out" / "report.md").read_text()


@pytest.mark.parametrize("experiment,corpus,vocab", [("frontier", "shakespeare", 65), ("frontier_ptb", "ptb", 10_000)])
def test_frontier_sizes_span_ten_times_in_parameters_and_sweep_budgets(experiment, corpus, vocab, tmp_path):
    from omegaconf import OmegaConf

    from conftest import CONF, compose_cfg
    from seqbench.data.spec import TaskSpec
    from seqbench.families import FAMILIES, compared
    from seqbench.models.recurrent import RecurrentModel
    from seqbench.training.run import instantiate

    sweep = OmegaConf.load(CONF / "experiment" / f"{experiment}.yaml").hydra.sweeper.params
    assert sweep.size == "s,m,l" and len(str(sweep["budget.flops"]).split(",")) >= 2
    families = [f.rsplit("/", 1)[-1] for f in sweep["preset"].split(",")]
    assert set(families) <= set(compared()) and len(families) >= 3
    assert {FAMILIES[f].cls is RecurrentModel for f in families} == {True, False}  # recurrent and attention
    for family in families:
        params = {}
        for size in "sl":
            cfg = compose_cfg([f"experiment={experiment}", f"preset=frontier/{corpus}/{family}", f"size={size}",
                               "logger=csv"], tmp_path)
            model = instantiate(cfg.model, "model", spec=TaskSpec("lm", vocab_size=vocab))
            params[size] = model.num_params(non_embedding=True)
            # the size's count is written in its config's comments
            assert f"{params[size]:,}" in (CONF / "preset" / "frontier" / corpus / f"{family}.yaml").read_text()
        assert params["l"] >= 10 * params["s"], (family, params)
