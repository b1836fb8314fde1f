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
    ids, lengths, _ = model.transform([["the", "movie", "is", "Good"]], extract=True, device="cpu")
    assert [model.itos[i] for i in ids[0]] == ["<start>", "the", "<unk>", "is", "good", "<extract>"]


def test_reinit_keeps_network_and_tokens_but_not_the_weights(tmp_path):
    """model.reinit: the control differs from the fine-tuned model in the pre-trained weights only."""
    lm, path = _lm_ckpt(tmp_path)
    tuned = GPTModel(_sst_spec(), OPT, pretrained=str(path))
    control = GPTModel(_sst_spec(), OPT, pretrained=str(path), reinit=True)
    assert control.itos == tuned.itos and control.net.cfg == tuned.net.cfg
    assert {k: v.shape for k, v in control.state_dict().items()} == {k: v.shape for k, v in tuned.state_dict().items()}
    for name, value in lm.net.state_dict().items():  # the matrices (biases and norms start at 0 / 1 anyway)
        assert value.dim() < 2 or not torch.equal(control.net.state_dict()[name][: value.size(0)], value), name
    words = [["the", "film", "is", "good"]]
    assert torch.equal(control.transform(words, True, "cpu")[0], tuned.transform(words, True, "cpu")[0])


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
    ids, lengths, _ = model.transform(batch["words"], True, "cpu")
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
    other = LM_WORDS[:2] + LM_WORDS[:1:-1]  # the same words under other ids (a retrained tokenizer)
    lm_spec = TaskSpec(task="lm", vocab_size=len(other), tokenizer=LMTokenizer(Vocab(other), "word"))
    with pytest.raises(ConfigError, match="another vocabulary.*data.tokenizer_from"):
        GPTModel(lm_spec, OPT, pretrained=str(path))
    bert_like = tmp_path / "other.ckpt"
    torch.save({"state_dict": {}, "seqbench_pretrained": {"family": "bert"}}, bert_like)
    with pytest.raises(ConfigError, match="holds a bert backbone, not a gpt one"):
        GPTModel(_sst_spec(), OPT, pretrained=str(bert_like))


def test_continued_pretraining_starts_from_every_weight_of_the_lm(tmp_path):
    """model.pretrained on lm: the same network, every weight as saved, sizes from the checkpoint."""
    lm, path = _lm_ckpt(tmp_path)
    spec = TaskSpec(task="lm", vocab_size=len(LM_WORDS), tokenizer=LMTokenizer(Vocab(LM_WORDS), "word"))
    model = GPTModel(spec, OPT, n_layer=3, d_model=64, pretrained=str(path))
    assert model.net.state_dict().keys() == lm.net.state_dict().keys()
    for name, value in lm.net.state_dict().items():
        assert torch.equal(model.net.state_dict()[name], value), name
    ids = torch.tensor([[2, 3, 4, 5]])
    torch.testing.assert_close(model.eval().net(ids), lm.eval().net(ids))
    assert model.context == TINY["context"]


LM_LINES = ["the film is good", "the film is bad", "a good film", "a bad movie is a bad film"] * 20


def _bpe_ckpt(tmp_path):
    """A GPT LM at BPE level: its checkpoint carries the tokenizer, as experiment=pretrain_gpt's does."""
    from seqbench.data.subword import train_tokenizer

    torch.manual_seed(0)
    subword = train_tokenizer(LM_LINES, 60, "bpe", lowercase=True)
    vocab = Vocab([subword.id_to_token(i) for i in range(subword.vocab_size)])
    spec = TaskSpec(task="lm", vocab_size=len(vocab), tokenizer=LMTokenizer(vocab, "bpe", subword))
    lm = GPTModel(spec, OPT, **TINY)
    ckpt = {"state_dict": lm.state_dict()}
    lm.on_save_checkpoint(ckpt)
    torch.save(ckpt, tmp_path / "gpt-bpe.ckpt")
    return subword, tmp_path / "gpt-bpe.ckpt"


def test_a_bpe_gpt_cuts_the_task_words_into_its_own_pieces(tmp_path):
    subword, path = _bpe_ckpt(tmp_path)
    model = GPTModel(_sst_spec(), OPT, pretrained=str(path))
    words = [["The", "filmy", "movie"], ["good"]]
    ids, lengths, first = model.transform(words, extract=True, device="cpu")
    pieces = [subword.tokenizer.encode(w, is_pretokenized=True, add_special_tokens=False).ids for w in words]
    assert pieces[0] == subword.tokenizer.encode("the filmy movie").ids  # lowercased like the LM's text
    assert len(pieces[0]) > 3  # "filmy" is not a piece of its own: no word is unknown, it is cut
    for b in range(2):
        assert ids[b, : lengths[b]].tolist() == [model.stoi["<start>"]] + pieces[b] + [model.stoi["<extract>"]]
    # each word's first piece, position counted in the row (after <start>)
    starts = [0] + list(torch.tensor([len(subword.tokens(w)) for w in ["the", "filmy"]]).cumsum(0))
    assert first[0].tolist() == [s + 1 for s in starts]


def test_a_bpe_gpt_cuts_inputs_to_its_context_and_tags_every_word(tmp_path):
    _, path = _bpe_ckpt(tmp_path)
    spec = _sst_spec("tagging")
    spec = TaskSpec(task="tagging", vocab_size=spec.vocab_size, num_classes=3, pad_id=0, max_len=40,
                    tokenizer=spec.tokenizer)
    model = GPTModel(spec, OPT, pretrained=str(path)).eval()
    words = [["filmy"] * 30, ["good", "film"]]  # the first is longer than the context (12) in pieces
    ids, lengths, first = model.transform(words, extract=False, device="cpu")
    assert lengths[0] == TINY["context"] and ids.size(1) == TINY["context"]
    assert int(first[0].max()) == TINY["context"] - 1  # words cut off read the last position
    logits = model.tag({"words": words, "tags": torch.zeros(2, 30, dtype=torch.long)})
    assert logits.shape == (2, 30, 3)
