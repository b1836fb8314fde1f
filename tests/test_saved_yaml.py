"""The libyaml reading of saved configs (seqbench.training.saved_yaml) and the trials read through it."""

from __future__ import annotations

import json

import pytest
import yaml
from omegaconf import OmegaConf

from seqbench.protocol.tuning_trials import read_trials
from seqbench.training.saved_yaml import load

TRICKY = """\
budget:
  flops: 1e12
  lr: 1.0e-3
  evals: 10
date: 2026-11-29
plain: ~
big: .inf
name: 'preset=frontier/ptb/lstm'
ref: ${budget.evals}
list: [1, 2e3, x]
"""


def test_a_saved_config_reads_the_same_as_omegaconf_reads_it(tmp_path):
    # bug caught: libyaml's own safe loader reads `1e12` as a string and `2026-11-29` as a date, so a
    # budget would no longer compare as a number and a date no longer print as the config wrote it
    path = tmp_path / "config.yaml"
    path.write_text(TRICKY)
    ours, theirs = load(path), OmegaConf.load(path)
    assert OmegaConf.to_container(ours) == OmegaConf.to_container(theirs)
    assert ours.budget.flops == 1e12 and ours.date == "2026-11-29" and ours.ref == 10
    path.write_text("a: 1\na: 2\n")  # OmegaConf refuses a duplicate key; libyaml's own loader keeps the last
    with pytest.raises(yaml.constructor.ConstructorError):
        OmegaConf.load(path)
    with pytest.raises(yaml.constructor.ConstructorError):
        load(path)


def test_a_job_s_trial_follows_its_files_when_they_change(tmp_path):
    # bug caught: the read of a job's config kept for the process by its path alone, so a job that was
    # running when first read stays at the lr it first showed after its config is rewritten, and (with
    # the metrics read inside the kept part) stays "running" after it has finished
    from test_tuning_record import job

    sweep = tmp_path / "s"
    d = job(sweep, 0, "lstm", 1, 256, finished=False)
    (first,) = read_trials([sweep])
    assert first.status == "running" and first.lr_scale == 1
    cfg = OmegaConf.load(d / ".hydra" / "config.yaml")
    cfg.tune.lr_scale = 0.25
    OmegaConf.save(cfg, d / ".hydra" / "config.yaml")
    (d / "metrics.json").write_text(json.dumps({"status": "completed", "val/loss_best": 5.0, "val/loss": 5.0,
                                                "train/loss": 5.5}))
    (second,) = read_trials([sweep])
    assert second.lr_scale == 0.25 and second.status == "completed" and second.loss == 5.0


def test_a_job_read_again_after_a_family_is_registered_names_that_family(tmp_path):
    # bug caught: the kept read keyed on the job's files alone, so a notebook that registers its own
    # architecture (families.registered) after a first read still sees the module's name
    from seqbench.families import Family, registered
    from test_tuning_record import job

    sweep = tmp_path / "s"
    d = job(sweep, 0, "lstm", 1, 256)
    cfg = OmegaConf.load(d / ".hydra" / "config.yaml")
    cfg.model = {"_target_": "mypkg.models.MyNet", "optimizer": {"lr": 1.0}}
    OmegaConf.save(cfg, d / ".hydra" / "config.yaml")
    (before,) = read_trials([sweep])
    with registered(Family(name="mynet", module="mypkg.models.MyNet", colour="black")):
        (during,) = read_trials([sweep])
    assert before.family != "mynet" and during.family == "mynet"
