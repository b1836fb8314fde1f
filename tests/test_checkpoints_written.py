"""Every checkpoint seqbench writes loads back with `torch.load(weights_only=True)` and no allowlist.

Tiny runs of the families and tasks whose checkpoints carry more than weights: the recurrent LM's
stream state and step-decay schedule, an attention LM's warmup-cosine schedule, a translation model,
SST-2 with Lightning's EMA weight averaging (its own callback state), a CNN whose layer widths come
from Hydra as an OmegaConf list, and the two pre-training runs whose checkpoints carry a tokenizer
for fine-tuning (BERT's WordPiece, GPT's BPE). Lightning's own
callback, loop and optimizer states are in every one of them.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from conftest import TINY, TINY_RNN, compose_cfg, require_corpus
from seqbench.training.run import train

GPT = ["model.n_layer=1", "model.n_head=2", "model.d_model=16", "model.context=16", "data.batch_size=4",
       "data.eval_batch_size=4"]
RUNS = {
    "recurrent_lm": (["model=lstm", "data=ptb", *TINY_RNN], "ptb"),
    "attention_lm": (["model=gpt", "data=ptb", *GPT], "ptb"),
    "sst2_ema": (["experiment=sst2_bilstm", "model.char_features=8", *TINY_RNN], "sst2"),
    "image_cnn": (["preset=mnist/cnn"], "mnist"),  # `widths` arrives from Hydra as a ListConfig
    "bert_pretraining": pytest.param((["model=bert", "data=pretrain_text", "model.n_layer=1", "model.n_head=2",
                                       "model.d_model=16", "data.max_pairs=200", "data.vocab_size=500"], "ptb"),
                                     marks=pytest.mark.slow),
    "gpt_bpe_pretraining": pytest.param((["model=gpt", "data=pretrain_lm", "data.source=ptb", "data.bpe_vocab=300",
                                          *GPT], "ptb"), marks=pytest.mark.slow),
    "translation": pytest.param((["model=lstm", "data=multi30k", "model.attention=bahdanau", *TINY_RNN], "multi30k"),
                                marks=pytest.mark.slow),
}


@pytest.mark.parametrize("run", RUNS.values(), ids=RUNS.keys())
def test_written_checkpoints_load_with_weights_only(run, tmp_path):
    overrides, corpus = run
    require_corpus(corpus)
    assert train(compose_cfg(TINY + overrides, tmp_path), tmp_path)["status"] == "completed"
    written = sorted((tmp_path / "checkpoints").glob("*.ckpt"))
    assert {p.name for p in written} >= {"last.ckpt"} and any(p.name.startswith("best-") for p in written)
    # in a fresh interpreter that imported torch only: no allowlist that seqbench, Lightning or a
    # test registered with torch.serialization.add_safe_globals can help
    load_all = "import sys, torch\nfor p in sys.argv[1:]: torch.load(p, weights_only=True)"
    out = subprocess.run([sys.executable, "-c", load_all, *map(str, written)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    for path in written:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        assert ckpt["state_dict"] and ckpt["callbacks"] and ckpt["optimizer_states"], path.name
        assert all(type(v) in (dict, list, str, int, float, bool, type(None)) or isinstance(v, torch.Tensor)
                   for v in ckpt["hyper_parameters"].values())


def test_a_run_resumes_through_the_safe_loader(tmp_path):
    """`ckpt_path=` hands Lightning weights_only=True; a resumed run continues at the saved step."""
    first = tmp_path / "first"
    train(compose_cfg(TINY + TINY_RNN + ["model=lstm", "data=ptb"], first), first)
    resumed = tmp_path / "resumed"
    cfg = compose_cfg(TINY + TINY_RNN + ["model=lstm", "data=ptb", "trainer.max_epochs=2",
                                         f"ckpt_path={first / 'checkpoints' / 'last.ckpt'}"], resumed)
    assert train(cfg, resumed)["status"] == "completed"
    assert torch.load(resumed / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 8  # 4 + 4
