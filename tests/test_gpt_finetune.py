"""GPT pre-train -> fine-tune: the LM's weights arrive exactly, the input transformation adds its three
tokens, and the task's loss is L2 + λ·L1 with the LM loss on the fine-tuning text."""

from __future__ import annotations

from functools import partial

import pytest
import torch
import torch.nn.functional as F

from seqbench.data.lm import LMTokenizer
from seqbench.data.sentences import WordTokenizer
from seqbench.data.spec import TaskSpec
from seqbench.data.vocab import Vocab
from seqbench.errors import ConfigError
from seqbench.models.gpt import GPTModel
from seqbench.tasks.classification import Classification

OPT = partial(torch.optim.SGD, lr=0.1)
LM_WORDS = ["<eos>", "<unk>", "the", "film", "is", "good", "bad", "a"]
TINY = dict(n_layer=1, n_head=2, d_model=16, context=12)


def _lm_ckpt(tmp_path, level="word"):
    torch.manual_seed(0)
    spec = TaskSpec(task="lm", vocab_size=len(LM_WORDS), tokenizer=LMTokenizer(Vocab(LM_WORDS), level))
    lm = GPTModel(spec, OPT, **TINY)
    ckpt = {"state_dict": lm.state_dict()}
    lm.on_save_checkpoint(ckpt)
    path = tmp_path / f"gpt-{level}.ckpt"
    torch.save(ckpt, path)
    return lm, path


def _sst_spec(task="classification"):
    words = ["<pad>", "<unk>", "the", "film", "movie", "good"]
    return TaskSpec(task=task, vocab_size=len(words), num_classes=2, pad_id=0, max_len=5,
                    tokenizer=WordTokenizer(Vocab(words)))


def test_pretrained_gpt_restores_every_weight_and_adds_three_tokens(tmp_path):
    lm, path = _lm_ckpt(tmp_path)
    model = GPTModel(_sst_spec(), OPT, n_layer=3, d_model=64, pretrained=str(path))  # sizes from the ckpt
    new, old = model.net.state_dict(), lm.net.state_dict()
    for name, value in old.items():
        if name in ("tok_emb.weight", "lm_head.weight"):
            assert torch.equal(new[name][: len(LM_WORDS)], value) and new[name].size(0) == len(LM_WORDS) + 3
        else:
            assert torch.equal(new[name], value), name
    assert model.net.lm_head.weight is model.net.tok_emb.weight
    ids, lengths = model.transform([["the", "movie", "is", "Good"]], extract=True, device="cpu")
    assert [model.itos[i] for i in ids[0]] == ["<start>", "the", "<unk>", "is", "good", "<extract>"]


def test_aux_lm_loss_is_added_with_its_weight_and_covers_the_words_only(tmp_path):
    _, path = _lm_ckpt(tmp_path)
    model = GPTModel(_sst_spec(), OPT, pretrained=str(path), aux_lm_weight=0.5).train()
    logged = {}
    model.log = lambda name, value, **kw: logged.__setitem__(name, float(value))
    batch = {"words": [["the", "film", "is", "good"], ["a", "bad", "film"]], "label": torch.tensor([1, 0])}
    task = Classification(2)
    torch.manual_seed(0)
    loss = task.step(model, batch, "train")
    logits = model.classify(batch)
    l2 = F.cross_entropy(logits, batch["label"])
    l1, weight = model.auxiliary_loss()
    assert weight == 0.5
    torch.testing.assert_close(loss, l2 + 0.5 * l1)
    assert logged["train/task_loss"] == pytest.approx(l2.item()) and logged["train/aux_lm_loss"] == pytest.approx(l1.item())
    # L1 by hand: <start> predicts w1, ..., w_{n-1} predicts w_n; <extract> and padding are not text
    ids, lengths = model.transform(batch["words"], True, "cpu")
    lm_logits = model.net(ids)  # (B, P, V)
    terms = [F.cross_entropy(lm_logits[b, t], ids[b, t + 1], reduction="sum")
             for b in range(2) for t in range(len(batch["words"][b]))]
    torch.testing.assert_close(l1, torch.stack(terms).mean())
    model.aux_lm_weight = 0.0
    model.classify(batch)
    assert model.auxiliary_loss() is None  # λ = 0: plain fine-tuning


def test_pretrained_gpt_errors(tmp_path):
    _, char_path = _lm_ckpt(tmp_path, level="char")
    with pytest.raises(ConfigError, match="characters"):
        GPTModel(_sst_spec(), OPT, pretrained=str(char_path))
    with pytest.raises(ConfigError, match="does not exist"):
        GPTModel(_sst_spec(), OPT, pretrained=str(tmp_path / "missing.ckpt"))
    _, path = _lm_ckpt(tmp_path)
    lm_spec = TaskSpec(task="lm", vocab_size=len(LM_WORDS), tokenizer=LMTokenizer(Vocab(LM_WORDS), "word"))
    with pytest.raises(ConfigError, match="ckpt_path"):
        GPTModel(lm_spec, OPT, pretrained=str(path))
    bert_like = tmp_path / "other.ckpt"
    torch.save({"state_dict": {}, "seqbench_pretrained": {"family": "bert"}}, bert_like)
    with pytest.raises(ConfigError, match="holds a bert backbone, not a gpt one"):
        GPTModel(_sst_spec(), OPT, pretrained=str(bert_like))
