"""The pre-training table: per-seed scores, mean ± std, and the gain paired by seed; failures listed."""

from __future__ import annotations

import json

import yaml

from seqbench.reports.finetune_report import main


def _job(root, num, preset, seed, acc, status="completed", extra="", **metrics_extra):
    job = root / str(num)
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(
        {"hydra": {"runtime": {"choices": {"family": f"pretraining/{preset}", "model": "bert"}}}}))
    metrics = {"status": status, "params": 1000, "wall_time_s": 120.0,
               "overrides": f"experiment=pretraining preset=pretraining/{preset} seed={seed} {extra}".strip(),
               **metrics_extra}
    if acc is not None:
        metrics["test/acc"] = acc
    (job / "metrics.json").write_text(json.dumps(metrics))


def test_gain_is_paired_by_seed_and_failures_are_not_averaged(tmp_path):
    sweep = tmp_path / "sweep"
    scores = {("bert", 1): 0.80, ("bert", 2): 0.78, ("bert", 3): 0.79,
              ("bert_pretrained", 1): 0.83, ("bert_pretrained", 2): 0.77, ("bert_pretrained", 3): 0.82}
    for n, ((preset, seed), acc) in enumerate(scores.items()):
        _job(sweep, n, preset, seed, acc)
    _job(sweep, 6, "gpt", 1, None, status="failed")
    _job(sweep, 7, "bert_reinit", 1, 0.81)
    _job(sweep, 8, "bert_reinit", 3, 0.75)
    text = main([str(sweep), "--out", str(tmp_path / "t.md")])
    assert "| bert | 1, 2, 3 | 80.00, 78.00, 79.00 | 79.00 ± 1.00 | 1,000 | 2.0 |" in text
    assert "| bert_pretrained | 1, 2, 3 | 83.00, 77.00, 82.00 | 80.67 ± 3.21 |" in text
    # seed by seed: +3, -1, +3 -> mean 1.67, won 2 of 3
    assert "| bert_pretrained − bert | 1, 2, 3 | +3.00, -1.00, +3.00 | 1.67 ± 2.31 | won 2 of 3 |" in text
    assert "| bert_pretrained − bert_reinit | 1, 3 | +2.00, +7.00 | 4.50 ± 3.54 | won 2 of 2 |" in text
    assert "Failed jobs (not averaged): sweep/6" in text and "| gpt |" not in text
    assert (tmp_path / "t.md").read_text().strip() == text


def test_grid_value_is_chosen_per_preset_by_validation_never_by_test(tmp_path):
    """Each preset keeps its own learning rate, the one with the best mean validation score; the gain then
    pairs the chosen runs seed by seed. Test scores are shown but choose nothing."""
    sweep = tmp_path / "sweep"
    n = 0
    #            preset            lr     seed: (val, test)
    grid = {("bert", "1e-4"): {1: (0.80, 0.90), 2: (0.80, 0.90)},      # best test, worse validation
            ("bert", "5e-4"): {1: (0.82, 0.78), 2: (0.84, 0.80)},
            ("bert_pretrained", "1e-4"): {1: (0.85, 0.83), 2: (0.83, 0.81)},
            ("bert_pretrained", "5e-4"): {1: (0.81, 0.79), 2: (0.81, 0.79)}}
    for (preset, lr), seeds in grid.items():
        for seed, (val, test) in seeds.items():
            _job(sweep, n, preset, seed, test, extra=f"model.optimizer.lr={lr}", **{"val/acc_best": val})
            n += 1
    _job(sweep, n, "bert", 3, 0.99, extra="model.optimizer.lr=1e-3")  # no val/acc_best: cannot be chosen
    text = main([str(sweep), "--grid", "model.optimizer.lr"])
    assert "| bert | 1e-4 | 2 | 80.00 | 90.00 ± 0.00 |" in text
    assert "| bert | **5e-4** | 2 | **83.00** | 79.00 ± 1.41 |" in text
    assert "| bert_pretrained | **1e-4** | 2 | **84.00** | 82.00 ± 1.41 |" in text
    assert "Left out, no val/acc_best to choose by: sweep/8" in text
    assert "| bert | 1, 2 | 78.00, 80.00 | 79.00 ± 1.41 |" in text
    assert "| bert_pretrained − bert | 1, 2 | +5.00, +1.00 | 3.00 ± 2.83 | won 2 of 2 |" in text
