"""The same rules outside the frontier, as sweeps: translation with one label-smoothing value for every
family (experiment=multi30k_label_smoothing) and the probes' learning rate from one search for every
family (experiment=long_range_lr)."""

from __future__ import annotations

import pytest
import torch

from conftest import compose_cfg
from seqbench.data.spec import TaskSpec
from seqbench.families import compared
from seqbench.training.run import instantiate
from seqbench.tasks.translation import IGNORE_INDEX

SPEC = TaskSpec("translation", src_vocab_size=30, tgt_vocab_size=20, pad_id=0, bos_id=2, eos_id=3, max_len=12,
                extras={"joint_vocab": False})


def test_label_smoothing_is_one_sweep_value_over_the_families_sweep(tmp_path):
    families = compose_cfg(["experiment=multi30k_families"], tmp_path).hydra.sweeper.params
    params = compose_cfg(["experiment=multi30k_label_smoothing"], tmp_path).hydra.sweeper.params
    assert params["preset"] == families["preset"] and params["trainer.max_epochs"] == families["trainer.max_epochs"]
    assert str(params["model.label_smoothing"]) == "0.1" and len(str(params.seed).split(",")) >= 2
    for preset in params["preset"].split(","):
        # the sweep's value is a command-line override: it wins over every preset, 0.1 or none
        for value in (0.0, 0.1):
            cfg = compose_cfg([f"preset={preset}", f"model.label_smoothing={value}"], tmp_path)
            assert cfg.model.label_smoothing == value, preset


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_a_recurrent_translator_trains_on_the_smoothed_loss(smoothing, tmp_path):
    cfg = compose_cfg(["preset=multi30k/bahdanau", f"model.label_smoothing={smoothing}", "model.hidden_size=16",
                       "model.embedding_size=16", "model.attention_size=16"], tmp_path)
    model = instantiate(cfg.model, "model", spec=SPEC)
    assert model.label_smoothing == smoothing
    torch.manual_seed(0)
    batch = {"src": torch.randint(4, 30, (2, 7)), "src_lengths": torch.tensor([7, 7]),
             "tgt_in": torch.randint(4, 20, (2, 5)), "target": torch.randint(4, 20, (2, 5)), "index": torch.arange(2)}
    model.eval()  # no dropout: the two forward passes below see the same logits
    model.log = lambda *a, **k: None
    loss = model.task.step(model, batch, "train")
    logits = model.translate_logits(batch).flatten(0, 1).float()
    expected = torch.nn.functional.cross_entropy(logits, batch["target"].flatten(), ignore_index=IGNORE_INDEX,
                                                 label_smoothing=smoothing)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-4)


def test_the_probes_search_one_grid_for_every_family(tmp_path):
    cfg = compose_cfg(["experiment=long_range_lr"], tmp_path)
    params = cfg.hydra.sweeper.params
    assert params["preset"].split(",") == [f"probe/{f}" for f in compared()]
    scales = [float(s) for s in str(params["tune.lr_scale"]).split(",")]
    assert len(scales) >= 3 and min(scales) < 1 < max(scales)
    assert cfg.trainer.max_steps == compose_cfg(["experiment=long_range"], tmp_path).trainer.max_steps
