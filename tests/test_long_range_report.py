"""The long-range report reads a sweep's job directories into a family x T table and a plot."""

from __future__ import annotations

import json

import yaml

from seqbench.reports.long_range_report import main
from seqbench.reports.ledger import RECORD, read_record
from seqbench.provenance import cpu_model


def _job(root, num, family, T, acc, loss, status="completed", lr=None):
    job = root / str(num)
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"data": {"T": T}}))
    (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(
        {"hydra": {"runtime": {"choices": {"family": f"probe/{family}", "model": "lstm"}}}}))
    metrics = {"status": status, "test/acc": acc, "test/loss": loss, "val/baseline_acc": 0.125,
               "val/baseline_loss": 2.0794, "params": 1000, "overrides": f"preset=probe/{family} data.T={T}",
               **({"tune/lr": lr} if lr is not None else {})}
    (job / "metrics.json").write_text(json.dumps(metrics))


def test_a_tuned_sweep_s_rows_name_each_family_s_rate(tmp_path):
    # bug caught: the tuned probes' table without the rate each family trained at, so the page could
    # not show what the search chose (experiment=long_range_lr with tune.per_family)
    sweep = tmp_path / "sweep"
    _job(sweep, 0, "gru", 50, None, None, status="failed", lr=0.0316)  # a seed that crashed, read first
    _job(sweep, 1, "gru", 50, 0.9, 0.3, lr=0.0316)
    _job(sweep, 2, "gru", 500, 0.5, 1.2, lr=0.0316)
    _job(sweep, 3, "transformer", 50, 1.0, 0.0002, lr=0.01)
    _job(sweep, 4, "gru", 50, 0.7, 0.5, lr=0.0316)
    lines = main([str(sweep), "--out", str(tmp_path / "out")])["table"].splitlines()
    # bug caught too: a cell called "failed" because its first seed failed, with two others completed
    # and bug caught: a mean without the seeds' range (GPT at T = 500: one seed solved it, one did not)
    assert "| gru (1,000; lr 0.0316) | 0.800 (n=2: 0.700–0.900) | 0.500 |" in lines
    assert "| transformer (1,000; lr 0.01) | 1.000 | not run |" in lines
    assert "| transformer (1,000; lr 0.01) | 2.0e-04 | not run |" in lines  # the loss table: solved is not 0.000


def test_table_and_plot_from_a_sweep(tmp_path):
    sweep = tmp_path / "sweep"
    _job(sweep, 0, "lstm", 50, 0.9, 0.3)
    _job(sweep, 1, "lstm", 500, 0.125, 2.08)
    _job(sweep, 2, "transformer", 50, 1.0, 0.01)
    _job(sweep, 3, "transformer", 500, None, None, status="failed")
    result = main([str(sweep), "--out", str(tmp_path / "out")])
    lines = result["table"].splitlines()
    assert "| family (params) | T = 50 | T = 500 |" in lines
    assert "| lstm (1,000) | 0.900 | 0.125 |" in lines
    assert "| transformer (1,000) | 1.000 | failed |" in lines
    assert "| trivial baseline | 0.125 | 0.125 |" in lines
    assert "| lstm (1,000) | 0.300 | 2.080 |" in lines  # the loss table
    assert result["png"].stat().st_size > 5000
    assert "Failed jobs" in result["report"].read_text()
    (record,) = read_record(tmp_path / "out" / RECORD, tmp_path)  # the ledger: how these numbers were made
    assert record.files == ("long_range.csv", "long_range.md") and str(sweep) in record.command
    assert cpu_model() in record.hardware


def _solve_job(root, num, family, T, seed, mse, steps, cap=1000, status="completed"):
    """One job of a train-until-solved adding sweep: solved when `steps` is not None."""
    job = root / str(num)
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"data": {"T": T}, "seed": seed,
                                                                 "trainer": {"max_steps": cap}}))
    (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(
        {"hydra": {"runtime": {"choices": {"family": f"probe/{family}", "model": "lstm"}}}}))
    metrics = {"status": status, "test/mse": mse, "test/loss": mse, "val/baseline_loss": 1 / 6, "params": 500,
               "solved": steps is not None if status == "completed" else None, "steps_to_solve": steps,
               "solve_criterion": "val/mse <= 0.01"}
    (job / "metrics.json").write_text(json.dumps(metrics))


def test_until_solved_sweep_gives_seeds_solved_steps_and_the_largest_T_per_family(tmp_path):
    sweep = tmp_path / "sweep"
    jobs = [("lstm", 50, 1, 0.004, 300), ("lstm", 50, 2, 0.006, 500), ("lstm", 100, 1, 0.008, 900),
            ("lstm", 100, 2, 0.16, None), ("lstm", 200, 1, 0.17, None), ("lstm", 200, 2, 0.15, None),
            ("rnn", 50, 1, 0.16, None), ("rnn", 50, 2, 0.17, None), ("rnn", 100, 1, 0.17, None),
            ("transformer", 50, 1, 0.001, 100), ("transformer", 50, 2, 0.003, 200),
            ("transformer", 100, 1, 0.002, 200), ("transformer", 200, 1, 0.002, 400)]
    for num, job in enumerate(jobs):
        _solve_job(sweep, num, *job)
    _solve_job(sweep, 99, "rnn", 200, 1, None, None, status="failed")
    result = main([str(sweep), "--out", str(tmp_path / "out")])
    lines = result["table"].splitlines()
    assert "| family | T = 50 | T = 100 | T = 200 |" in lines
    assert "| lstm | 2/2 in 400; 0.005 (0.004–0.006) | 1/2 in 900; 0.084 (0.008–0.160) | 0/2; 0.160 (0.150–0.170) |" in lines
    assert "| rnn | 0/2; 0.165 (0.160–0.170) | 0/1; 0.170 | failed |" in lines
    assert "| transformer | 2/2 in 150; 0.002 (0.001–0.003) | 1/1 in 200; 0.002 | 1/1 in 400; 0.002 |" in lines
    assert "cap 1,000 steps" in result["table"]
    assert "| lstm | 50 | 100 |" in lines  # one seed of two failed at T = 100: the frontier is there
    assert "| rnn | none | 50 |" in lines
    assert "| transformer | 200 | none (solved at every T run) |" in lines
    assert result["solve_png"].stat().st_size > 10000
    assert "long_range_solve.png" in result["report"].read_text()
    assert result["report"].read_text().startswith("# Long-range probe: test MSE against the gap T")  # adding, not copy


def test_recall_tables_show_the_value_frequency_plateau_from_the_log_or_the_config(tmp_path):
    """A recall sweep's tables carry the plateau beside the trivial baseline: as the job logged it, or,
    for runs from before that metric, computed from the job's data config (8 pairs over 8 values:
    0.325). Copy and adding have no such line."""
    sweep = tmp_path / "recall"
    _job(sweep, 0, "gru", 50, 0.32, 1.56)
    _job(sweep, 1, "transformer", 50, 1.0, 0.01)
    recall = {"_target_": "seqbench.data.synthetic.RecallDataModule", "T": 50, "num_pairs": 8, "num_values": 8}
    (sweep / "0" / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"data": recall}))
    logged = json.loads((sweep / "1" / "metrics.json").read_text())
    (sweep / "1" / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"data": recall}))
    logged.update({"val/baseline_frequency_acc": 0.3247, "val/baseline_frequency_loss": 1.5567})
    (sweep / "1" / "metrics.json").write_text(json.dumps(logged))
    lines = main([str(sweep), "--out", str(tmp_path / "out")])["table"].splitlines()
    assert "| trivial baseline | 0.125 |" in lines
    assert "| value-frequency plateau | 0.325 |" in lines  # the accuracy table
    assert "| value-frequency plateau | 1.557 |" in lines  # the loss table

    copy = tmp_path / "copy"
    _job(copy, 0, "gru", 50, 0.9, 0.3)
    assert "plateau" not in main([str(copy), "--out", str(tmp_path / "out2")])["table"]
