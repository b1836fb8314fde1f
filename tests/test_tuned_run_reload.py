"""A run whose size the tuning chose reloads at that size, in `src/eval.py` and the analysis commands.

The chains train each final cell at the size the search chose, `tune.per_family.<family>.size`, which
`seqbench.training.tune.apply_tuning` puts in place as the run starts; the run's saved `.hydra/config.yaml` still
says the preset's default size. The bug this catches: a command that rebuilds the model from that file
without the tuning gets the default size, and the checkpoint does not fit it (the tuned 1e14 LSTM, size l,
met a size-m model in `seqbench.analysis.loss_by_position`).
"""

from __future__ import annotations

import torch
from omegaconf import OmegaConf

from conftest import compose_cfg, require_corpus
from seqbench.analysis import context_usage as cu
from seqbench.training.evaluate import run_config
from seqbench.training.run import build
from seqbench.training.tune import apply_tuning


def _tuned_run(tmp_path):
    """A saved run of the RNN trained at size s while the preset's default is m; its model's state."""
    require_corpus("tiny_shakespeare")
    cfg = compose_cfg(["experiment=tune_frontier", "preset=frontier/shakespeare/rnn",
                       "tune.per_family={rnn:{size:s}}"], tmp_path)
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")  # as Hydra saves it: before the run applies the tuning
    assert cfg.size == "m"
    trained = cfg.copy()
    apply_tuning(trained)
    _, model = build(trained)
    (run_dir / "checkpoints").mkdir()
    torch.save({"state_dict": model.state_dict()}, run_dir / "checkpoints" / "last.ckpt")
    return run_dir, model.state_dict()


def test_the_analysis_commands_rebuild_a_tuned_run_at_its_trained_size(tmp_path):
    run_dir, state = _tuned_run(tmp_path)
    (lm,) = cu.load_all([run_dir])
    loaded = lm.model.state_dict()
    assert all(torch.equal(loaded[k], state[k]) for k in state)


def test_eval_rebuilds_a_tuned_run_at_its_trained_size(tmp_path):
    run_dir, state = _tuned_run(tmp_path)
    cfg = compose_cfg([f"ckpt_path={run_dir / 'checkpoints' / 'last.ckpt'}"], tmp_path, config_name="eval")
    _, model = build(run_config(cfg))
    assert {k: v.shape for k, v in model.state_dict().items()} == {k: v.shape for k, v in state.items()}
