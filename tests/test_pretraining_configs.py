"""experiment=pretraining and its presets compose, are checked, and name a missing checkpoint."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from conftest import CONF, compose_cfg
from seqbench.training.config_check import check_config
from seqbench.errors import ConfigError

PRESETS = sorted(p.stem for p in (CONF / "preset" / "pretraining").glob("*.yaml"))


@pytest.mark.parametrize("preset", PRESETS)
def test_each_pretraining_preset_composes_and_is_checked(preset, tmp_path):
    cfg = compose_cfg(["experiment=pretraining", f"preset=pretraining/{preset}", "pretrained.bert=/b.ckpt",
                       "pretrained.gpt=/g.ckpt", "logger=csv"], tmp_path)
    check_config(cfg)
    assert cfg.data._target_.endswith("SST2DataModule") and cfg.callbacks.best_checkpoint.monitor == "val/acc"
    if preset.endswith("_pretrained"):
        assert cfg.model.pretrained in ("/b.ckpt", "/g.ckpt")


def test_pretrained_presets_need_the_checkpoint(tmp_path):
    cfg = compose_cfg(["experiment=pretraining", "preset=pretraining/bert_pretrained", "logger=csv"], tmp_path)
    with pytest.raises(ConfigError, match="model.pretrained"):
        check_config(cfg)


@pytest.mark.parametrize("name", ["pretrain_bert", "pretrain_gpt", "sst2_bilstm", "conll_bilstm_crf"])
def test_pretraining_and_recipe_experiments_compose(name, tmp_path):
    cfg = compose_cfg([f"experiment={name}", "logger=csv"], tmp_path)
    check_config(cfg)
    sweep = OmegaConf.select(cfg, "hydra.sweeper.params")
    assert not sweep  # single runs
