"""Every config composes and instantiates: model x data, trainers, loggers, debug modes, presets, sweeps."""

from __future__ import annotations

from pathlib import Path

import hydra
import pytest
from omegaconf import OmegaConf

from conftest import CONF, FIXTURES
from seqbench.training.config_check import check_config
from seqbench.families import FAMILIES
from seqbench.models.recurrent import RecurrentModel
from seqbench.training.run import build

MODELS = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))
DATAS = sorted(p.stem for p in (CONF / "data").glob("*.yaml"))
DATA_ARGS = {  # corpora with no copy in ../shared/data are read from fixtures in their real format
    "wikitext2": [f"data.data_dir={FIXTURES}"],
    "text": [f"data.data_dir={FIXTURES / 'text'}", "data.train_file=train.txt", "data.valid_file=valid.txt"],
}
LM_DATA = ["ptb", "wikitext2", "shakespeare_char", "text"]


def _model_data_pairs():
    for model in MODELS:
        target = OmegaConf.load(CONF / "model" / f"{model}.yaml")
        for data in DATAS:
            yield model, data


@pytest.mark.parametrize("model,data", list(_model_data_pairs()))
def test_every_model_data_pair_composes_and_is_checked(model, data, cfg_factory):
    from seqbench.analysis.matrix import supports

    # `mixer` has no layer of its own: the one its tiny overrides name (a command must give one, ConfigError)
    layer = [o for o in FAMILIES["mixer"].tiny if o.startswith("model.mixer=")] if model == "mixer" else []
    cfg = cfg_factory([f"model={model}", f"data={data}", *DATA_ARGS.get(data, []), *layer], tiny=False)
    data_cls = hydra.utils.get_class(cfg.data._target_)
    model_cls = hydra.utils.get_class(cfg.model._target_)
    if supports(model_cls, data_cls):
        check_config(cfg)
    else:
        from seqbench.errors import ConfigError

        with pytest.raises(ConfigError, match=f"model={model}|{model_cls.__name__}"):
            check_config(cfg, {"model": model, "data": data})


@pytest.mark.parametrize("model", [name for name, family in FAMILIES.items() if family.cls is RecurrentModel])
@pytest.mark.parametrize("data", LM_DATA)
def test_recurrent_models_build_on_every_lm_corpus(model, data, cfg_factory):
    cfg = cfg_factory([f"model={model}", f"data={data}", *DATA_ARGS.get(data, [])])
    datamodule, net = build(cfg)
    assert net.spec.vocab_size == len(datamodule.vocab)
    assert net.net.decoder.out_features == len(datamodule.vocab)  # the size comes from the data


@pytest.mark.parametrize("trainer", sorted(p.stem for p in (CONF / "trainer").glob("*.yaml")))
def test_trainer_configs_compose(trainer, cfg_factory):
    cfg = cfg_factory([f"trainer={trainer}"], tiny=False)
    assert cfg.trainer._target_.endswith("Trainer")
    check_config(cfg)
    if trainer in ("ddp", "ddp_cpu"):
        assert cfg.trainer.strategy == "ddp"


@pytest.mark.parametrize("logger", ["wandb", "csv", "tensorboard"])
def test_logger_configs_compose(logger, cfg_factory):
    cfg = cfg_factory([f"logger={logger}"], tiny=False)
    assert "csv" in cfg.logger  # local history always kept for the report
    check_config(cfg)


@pytest.mark.parametrize("debug", sorted(p.stem for p in (CONF / "debug").glob("*.yaml")))
def test_debug_modes_compose(debug, cfg_factory):
    cfg = cfg_factory([f"debug={debug}"], tiny=False)
    check_config(cfg)


@pytest.mark.parametrize("size,hidden,dropout,bptt,epochs,clip,init,start,factor", [
    ("small", 200, 0.0, 20, 13, 5.0, 0.1, 4, 0.5),
    ("medium", 650, 0.5, 35, 39, 5.0, 0.05, 6, 1 / 1.2),
    ("large", 1500, 0.65, 35, 55, 10.0, 0.04, 14, 1 / 1.15),
])  # clip and lr as in the paper, where the loss is summed over bptt steps
def test_zaremba_presets_match_the_paper(size, hidden, dropout, bptt, epochs, clip, init, start, factor, cfg_factory):
    cfg = cfg_factory([f"experiment=ptb_zaremba_{size}"], tiny=False)
    check_config(cfg)
    m = cfg.model
    assert (m.cell, m.num_layers, m.hidden_size, m.embedding_size) == ("lstm", 2, hidden, hidden)
    assert (m.dropout, m.tie_weights, m.init_range) == (dropout, False, init)
    # our loss is the mean over tokens = theirs / bptt: the same SGD run needs lr x bptt, clip / bptt
    assert m.optimizer._target_ == "torch.optim.SGD" and m.optimizer.lr == pytest.approx(1.0 * bptt)
    assert m.scheduler._target_ == "seqbench.optim.step_decay"
    assert (m.scheduler.start_epoch, m.scheduler.factor) == (start, pytest.approx(factor))
    assert (cfg.data.batch_size, cfg.data.bptt) == (20, bptt)
    assert cfg.trainer.max_epochs == epochs
    assert cfg.trainer.gradient_clip_val == pytest.approx(clip / bptt)


def test_zaremba_schedule_halves_after_epoch_four():
    import torch

    from seqbench.optim import step_decay

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = step_decay(opt, start_epoch=4, factor=0.5)
    lrs = []
    for _ in range(7):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert lrs == [1.0, 1.0, 1.0, 1.0, 0.5, 0.25, 0.125]


def test_hparams_search_and_slurm_launcher_compose(cfg_factory):
    cfg = cfg_factory(["hparams_search=ptb_lstm_optuna", "hydra/launcher=submitit_slurm"], tiny=False)
    assert "optuna" in cfg.hydra.sweeper._target_.lower()
    assert cfg.hydra.launcher._target_.endswith("SlurmLauncher")
    assert cfg.optimized_metric == "val/ppl"
