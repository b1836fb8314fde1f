"""What a run shows its user: a name and tags from its family and preset, the W&B job type of what it
does, debug runs apart from real ones, and an evaluation logged beside the run it evaluates."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from conftest import CONF, compose_cfg, run_cli
from wandb_offline import OfflineRun

PTB_PRESETS = sorted(p.stem for p in (CONF / "preset" / "ptb").glob("*.yaml"))


@pytest.mark.parametrize("family", PTB_PRESETS)
def test_the_flagship_sweep_names_each_run_by_its_family(family, tmp_path):
    """`experiment=ptb_families`: the rnn and gru presets choose `model=lstm`; their names must not say lstm."""
    cfg = compose_cfg(["experiment=ptb_families", f"preset=ptb/{family}"], tmp_path)
    assert cfg.run_name == f"{family}-ptb"
    assert list(cfg.tags) == [family, "ptb", f"ptb/{family}", "ptb_families", "families"]
    assert cfg.job_type == "train"


def test_a_name_given_on_the_command_line_is_kept(tmp_path):
    cfg = compose_cfg(["preset=ptb/gru", "run_name=my-gru", "tags=[mine]"], tmp_path)
    assert cfg.run_name == "my-gru" and list(cfg.tags) == ["gru", "ptb", "ptb/gru", "mine"]


def test_a_debug_run_goes_to_outputs_debug_with_its_logger_and_its_eval_joins_its_group(tmp_path):
    """`debug=fast` keeps the logger chosen (W&B here) with job type debug, in outputs/debug/; the
    evaluation of its checkpoint is a W&B run of job type eval in the same group."""
    env = {"WANDB_MODE": "offline"}
    train = run_cli(["preset=ptb/gru", "debug=fast", "model.hidden_size=16", "model.embedding_size=16",
                     "logger=wandb", "+wandb_group=g1", "trainer=cpu", "trainer.limit_train_batches=2",
                     "trainer.limit_val_batches=1", "trainer.limit_test_batches=1"], tmp_path, env=env)
    assert train.returncode == 0, train.stderr[-3000:]
    assert not (tmp_path / "runs").exists()
    (run_dir,) = (tmp_path / "debug" / "runs").iterdir()
    (offline,) = (run_dir / "wandb").glob("offline-run-*")
    run = OfflineRun.read(offline)
    assert (run.name, run.job_type, run.group) == ("gru-ptb", "debug", "g1")
    assert OmegaConf.load(run_dir / ".hydra" / "config.yaml").job_type == "debug"

    ev = run_cli([f"ckpt_path={run_dir / 'checkpoints' / 'last.ckpt'}", "split=valid", "trainer=cpu",
                  "trainer.limit_val_batches=1", f"hydra.run.dir={tmp_path / 'eval'}"], tmp_path, script="eval.py",
                 env=env)
    assert ev.returncode == 0, ev.stderr[-3000:]
    (offline,) = (tmp_path / "eval" / "wandb").glob("offline-run-*")
    evaluation = OfflineRun.read(offline)
    assert (evaluation.name, evaluation.job_type, evaluation.group) == ("gru-ptb-eval", "eval", "g1")
    computed = json.loads((tmp_path / "eval" / "eval_metrics.json").read_text())
    assert evaluation.summary["val/ppl"] == pytest.approx(computed["val/ppl"])
    assert evaluation.config["split"] == "valid" and evaluation.config["model"]["cell"] == "gru"
