"""BERT pre-training data and loading: masking statistics, NSP pairs, exact backbone restore, and the
one-sentence errors for a wrong `model.pretrained`."""

from __future__ import annotations

import random
from functools import partial

import pytest
import torch

from seqbench.data.pretrain_text import (CLS_ID, MASK_ID, SEP_ID, SPECIALS, make_pairs, mask_tokens,
                                         train_wordpiece)
from seqbench.data.sentences import WordTokenizer
from seqbench.data.spec import TaskSpec
from seqbench.data.streams import IGNORE_INDEX
from seqbench.data.vocab import Vocab
from seqbench.errors import ConfigError
from seqbench.models.bert import BertModel

SENTENCES = ["the cat sat on the mat", "a dog ran in the park", "cats and dogs are friends",
             "the park is green", "we sat in the sun"] * 4
TINY = dict(n_layer=1, n_head=2, d_model=16, context=32)
OPT = partial(torch.optim.SGD, lr=0.1)


def test_masking_statistics_and_specials_never_masked():
    g = torch.Generator().manual_seed(0)
    V = 1000
    ids = torch.randint(len(SPECIALS), V, (400, 100), generator=g)
    ids[:, 0], ids[:, 50], ids[:, -1], ids[:, 90:99] = CLS_ID, SEP_ID, SEP_ID, 0  # [CLS] [SEP] and padding
    inputs, labels = mask_tokens(ids, V, g)
    special = ids < len(SPECIALS)
    picked = labels != IGNORE_INDEX
    assert not picked[special].any() and (inputs[special] == ids[special]).all()
    assert picked[~special].float().mean().item() == pytest.approx(0.15, abs=0.005)
    assert (labels[picked] == ids[picked]).all()
    to_mask = (inputs[picked] == MASK_ID).float().mean().item()
    unchanged = (inputs[picked] == ids[picked]).float().mean().item()
    assert to_mask == pytest.approx(0.8, abs=0.01)
    assert unchanged == pytest.approx(0.1, abs=0.01)  # (a random draw equal to the original is ~0.1%)
    assert 1 - to_mask - unchanged == pytest.approx(0.1, abs=0.01)
    assert (inputs[picked & (inputs != MASK_ID)] >= len(SPECIALS)).all()  # random tokens are never specials


def test_nsp_pairs_are_half_true_next_and_well_formed():
    sentences = [[100 + i, 200 + i] for i in range(2000)]
    pairs = make_pairs(sentences, max_len=16, rng=random.Random(0))
    assert len(pairs) == 1999
    assert sum(label for *_, label in pairs) / len(pairs) == pytest.approx(0.5, abs=0.03)
    for i, (ids, segments, label) in enumerate(pairs):
        assert ids[0] == CLS_ID and ids[3] == SEP_ID and ids[-1] == SEP_ID
        assert segments == [0, 0, 0, 0, 1, 1, 1]
        assert ids[1] == 100 + i
        assert (ids[4] == 100 + i + 1) == bool(label)  # NotNext is never the true next sentence
    long = make_pairs([list(range(10, 30)), list(range(40, 45))], max_len=12, rng=random.Random(0))
    ids, segments, _ = long[0]
    assert len(ids) == 12 and ids.count(SEP_ID) == 2 and len(segments) == 12


def _pretrained_ckpt(tmp_path, tokenizer):
    spec = TaskSpec(task="mlm", vocab_size=tokenizer.get_vocab_size(), num_classes=2, max_len=32, tokenizer=tokenizer)
    model = BertModel(spec, OPT, **TINY)
    ckpt = {"state_dict": model.state_dict()}
    model.on_save_checkpoint(ckpt)
    path = tmp_path / "bert.ckpt"
    torch.save(ckpt, path)
    return model, path


def _word_spec(task="classification"):
    words = sorted({w for s in SENTENCES for w in s.split()})
    return TaskSpec(task=task, vocab_size=len(words) + 2, num_classes=3, pad_id=0, max_len=10,
                    tokenizer=WordTokenizer(Vocab(["<pad>", "<unk>"] + words)))


def test_fine_tuning_restores_the_backbone_exactly_and_tags_first_pieces(tmp_path):
    tokenizer = train_wordpiece(SENTENCES, vocab_size=60)
    pretrained, path = _pretrained_ckpt(tmp_path, tokenizer)
    for task in ("classification", "tagging"):
        model = BertModel(_word_spec(task), OPT, n_layer=3, d_model=64, pretrained=str(path))  # sizes from the ckpt
        for name, value in pretrained.backbone.state_dict().items():
            assert torch.equal(model.backbone.state_dict()[name], value), name
        assert model.tokenizer.get_vocab() == tokenizer.get_vocab()
    model.eval()
    words = [["the", "cats", "sat"], ["dogs"]]
    tags = torch.full((2, 3), IGNORE_INDEX)
    emissions = model.tag({"words": words, "tags": tags})
    assert emissions.shape == (2, 3, 3)
    ids, lengths, first = model.pieces(words, "cpu")
    assert ids[0, 0] == CLS_ID and ids[0, lengths[0] - 1] == SEP_ID
    assert first[0, 0] == 1 and (first[0, 1:] > first[0, :-1]).all()


def test_pretrained_errors_are_one_sentence(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        BertModel(_word_spec(), OPT, **TINY, pretrained=str(tmp_path / "nope.ckpt"))
    other = tmp_path / "lstm.ckpt"
    torch.save({"state_dict": {}}, other)
    with pytest.raises(ConfigError, match="not a bert one"):
        BertModel(_word_spec(), OPT, **TINY, pretrained=str(other))
    _, path = _pretrained_ckpt(tmp_path, train_wordpiece(SENTENCES, vocab_size=60))
    tokenizer = train_wordpiece(["completely different words here"] * 3, vocab_size=40)
    spec = TaskSpec(task="mlm", vocab_size=tokenizer.get_vocab_size(), num_classes=2, max_len=32, tokenizer=tokenizer)
    with pytest.raises(ConfigError, match="another tokenizer"):
        BertModel(spec, OPT, **TINY, pretrained=str(path))


def test_pretraining_step_scores_masked_positions_only():
    from seqbench.tasks.mlm import MaskedLMPretraining

    tokenizer = train_wordpiece(SENTENCES, vocab_size=60)
    V = tokenizer.get_vocab_size()
    model = BertModel(TaskSpec(task="mlm", vocab_size=V, num_classes=2, max_len=32, tokenizer=tokenizer), OPT,
                      **TINY).eval()
    model.log = lambda *a, **k: None
    ids = torch.randint(len(SPECIALS), V, (3, 9))
    labels = torch.full((3, 9), IGNORE_INDEX)
    labels[0, 2], labels[2, 5], labels[2, 7] = 11, 12, 13
    batch = {"input": ids, "segments": torch.zeros_like(ids), "lengths": torch.tensor([9, 9, 9]),
             "mlm_labels": labels, "nsp_label": torch.tensor([0, 1, 1])}
    mlm, nsp = model.pretrain_logits(batch)
    assert mlm.shape == (3, V) and nsp.shape == (3, 2)
    states = model.backbone(ids, batch["segments"], batch["lengths"])
    full, _ = model.heads(states, model.backbone.pool(states))  # every position: (3, 9, V)
    torch.testing.assert_close(mlm, full[labels != IGNORE_INDEX])
    loss = MaskedLMPretraining(V).step(model, batch, "train")
    expected = torch.nn.functional.cross_entropy(mlm, torch.tensor([11, 12, 13])) + \
        torch.nn.functional.cross_entropy(nsp, batch["nsp_label"])
    torch.testing.assert_close(loss, expected)


def test_pretrain_text_serves_pairs_with_masks_from_a_project_corpus():
    from conftest import DATA_DIR, require_corpus
    from seqbench.data.pretrain_text import PretrainTextDataModule

    require_corpus("sst2")
    data = PretrainTextDataModule(str(DATA_DIR), source="sst2", vocab_size=2000, max_len=32, max_pairs=64,
                                  download=False)
    data.setup()
    assert data.spec.task == "mlm" and data.spec.vocab_size <= 2000
    batch = next(iter(data.train_dataloader()))
    B, T = batch["input"].shape
    assert T <= 32 and batch["segments"].shape == (B, T) and set(batch["nsp_label"].tolist()) <= {0, 1}
    assert (batch["input"][:, 0] == CLS_ID).all()  # [CLS] is never masked
    picked = batch["mlm_labels"] != IGNORE_INDEX
    assert picked.any() and (batch["mlm_labels"][picked] >= len(SPECIALS)).all()
    first = next(iter(data.val_dataloader()))["input"]
    assert torch.equal(first, next(iter(data.val_dataloader()))["input"])  # evaluation masks are fixed


def test_continued_pretraining_reuses_the_checkpoint_tokenizer(tmp_path):
    """HF trainers give other ids on every run, so continuing pre-training must take the stored
    WordPiece (data.tokenizer_from) and then restores backbone and heads exactly."""
    from conftest import DATA_DIR, require_corpus
    from seqbench.data.pretrain_text import PretrainTextDataModule

    require_corpus("sst2")
    first = PretrainTextDataModule(str(DATA_DIR), source="sst2", vocab_size=500, max_len=32, max_pairs=8,
                                   download=False)
    first.setup()
    pretrained, path = _pretrained_ckpt(tmp_path, first.tokenizer)
    again = PretrainTextDataModule(str(DATA_DIR), source="sst2", vocab_size=500, max_len=32, max_pairs=8,
                                   download=False, tokenizer_from=str(path))
    again.setup()
    assert again.tokenizer.get_vocab() == first.tokenizer.get_vocab()
    assert again.pairs["train"] == first.pairs["train"]  # the same pairs, read as the same ids
    model = BertModel(again.spec, OPT, pretrained=str(path))
    for name, value in pretrained.state_dict().items():
        assert torch.equal(model.state_dict()[name], value), name


def test_load_tokenizer_reads_checkpoints_and_json_and_says_what_is_wrong(tmp_path):
    from seqbench.data.stored_tokenizer import load_tokenizer

    tokenizer = train_wordpiece(SENTENCES, vocab_size=60)
    _, path = _pretrained_ckpt(tmp_path, tokenizer)
    tokenizer.save(str(tmp_path / "wp.json"))
    for source in (path, tmp_path / "wp.json"):
        assert load_tokenizer(str(source)).get_vocab() == tokenizer.get_vocab()
    with pytest.raises(ConfigError, match="does not exist"):
        load_tokenizer(str(tmp_path / "nope.ckpt"))
    torch.save({"state_dict": {}}, tmp_path / "lstm.ckpt")
    with pytest.raises(ConfigError, match="stores no tokenizer"):
        load_tokenizer(str(tmp_path / "lstm.ckpt"))


def test_reinit_keeps_the_wordpiece_and_sizes_but_not_the_weights(tmp_path):
    tokenizer = train_wordpiece(SENTENCES, vocab_size=60)
    pretrained, path = _pretrained_ckpt(tmp_path, tokenizer)
    control = BertModel(_word_spec(), OPT, n_layer=3, pretrained=str(path), reinit=True)
    assert control.tokenizer.get_vocab() == tokenizer.get_vocab()
    assert control.backbone.cfg == pretrained.backbone.cfg
    changed = [name for name, value in pretrained.backbone.state_dict().items()
               if value.dim() > 1 and not torch.equal(control.backbone.state_dict()[name], value)]
    assert changed == [name for name, value in pretrained.backbone.state_dict().items() if value.dim() > 1]
