"""W&B works offline; multiruns give each job its own directory; a failed job hides nothing; Optuna runs."""

from __future__ import annotations

import json

import pytest

from conftest import TINY, TINY_RNN, run_cli
from seqbench.training.run import train

FAST = [a for a in TINY if not a.startswith("logger")] + TINY_RNN


def test_wandb_runs_offline_without_an_account(cfg_factory, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    cfg = cfg_factory(["logger=wandb", "test=false"])
    metrics = train(cfg, tmp_path)
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("run-*.wandb")), "no offline W&B run was written"
    assert metrics["status"] == "completed"
    import wandb

    wandb.teardown()  # wandb's core process may still be writing the log after wandb.finish() returns
    record = next(runs[0].glob("run-*.wandb")).read_bytes()  # the offline log `wandb sync` uploads
    for key in (b"params_non_embedding", b"hidden_size", b"val/ppl", b"train/loss"):
        assert key in record, key  # resolved config, sizes and metrics are all in it


def _jobs(sweep_root):
    (sweep,) = [p for p in (sweep_root / "multiruns").iterdir() if p.is_dir()]
    return sweep, [json.loads(line) for line in (sweep / "jobs.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_multirun_gives_each_job_its_own_dir_and_metrics(tmp_path):
    out = run_cli(["-m", "model=rnn,lstm", "logger=csv", *FAST], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep, jobs = _jobs(tmp_path)
    assert [j["status"] for j in jobs] == ["completed", "completed"]
    cells = set()
    for job in ("0", "1"):
        metrics = json.loads((sweep / job / "metrics.json").read_text())
        assert metrics["status"] == "completed" and metrics["test/ppl"] > 1
        cells.add(metrics["overrides"].split()[0])  # every override of the job is recorded, sweep's first
    assert cells == {"model=rnn", "model=lstm"}


def test_multirun_jobs_get_a_sweep_group_and_numbered_names(monkeypatch):
    from types import SimpleNamespace

    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from seqbench.training.loggers import sweep_identity

    fake = SimpleNamespace(mode=RunMode.MULTIRUN, job=SimpleNamespace(num=3),
                           sweep=SimpleNamespace(dir="outputs/multiruns/2026-11-23_10-00-00"))
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: fake))
    assert sweep_identity("lstm-ptb", None) == ("lstm-ptb-3", "sweep-2026-11-23_10-00-00")
    assert sweep_identity("lstm-ptb", "mine") == ("lstm-ptb-3", "mine")
    fake.mode = RunMode.RUN
    assert sweep_identity("lstm-ptb", None) == ("lstm-ptb", None)


@pytest.mark.slow
def test_a_failed_job_is_reported_and_the_others_still_run(tmp_path):
    out = run_cli(["-m", "model.num_layers=abc,1", "logger=csv", *FAST], tmp_path)
    assert out.returncode != 0  # the sweep as a whole reports failure ...
    sweep, jobs = _jobs(tmp_path)
    assert [j["status"] for j in jobs] == ["failed", "completed"]  # ... but job 1 ran after job 0 failed
    assert "model.num_layers must be an integer" in jobs[0]["error"]
    assert json.loads((sweep / "0" / "metrics.json").read_text())["status"] == "failed"
    assert json.loads((sweep / "1" / "metrics.json").read_text())["status"] == "completed"
    assert "FAILED" in out.stderr + out.stdout


@pytest.mark.slow
def test_optuna_sweep_runs_trials_on_validation_perplexity(tmp_path):
    out = run_cli(["hparams_search=ptb_lstm_optuna", "hydra.sweeper.n_trials=2",
                   "hydra.sweeper.sampler.n_startup_trials=1", "logger=csv", *FAST], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    sweep, jobs = _jobs(tmp_path)
    assert len(jobs) == 2 and all(j["status"] == "completed" for j in jobs)
    best = (sweep / "optimization_results.yaml").read_text()
    assert "best_params" in best and "best_value" in best
