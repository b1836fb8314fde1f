"""Language-model corpora on real files: counts, vocabularies, <unk>, checksums, missing data."""

from __future__ import annotations

import shutil
import sys

import pytest
import torch

from conftest import DATA_DIR, FIXTURES
from seqbench.data import files
from seqbench.data.ptb import PTBDataModule
from seqbench.data.shakespeare import ShakespeareCharDataModule
from seqbench.data.text import TextDataModule
from seqbench.data.vocab import EOS, UNK
from seqbench.data.wikitext2 import WikiText2DataModule
from seqbench.errors import ChecksumError, DataNotFoundError


@pytest.fixture(scope="module")
def ptb():
    dm = PTBDataModule(str(DATA_DIR))
    dm.setup()
    return dm


def test_ptb_matches_published_counts(ptb):
    # SOURCE.md: 929,589 / 73,760 / 82,430 tokens including <eos>, 10,000 distinct in train
    assert [ptb.num_tokens(s) for s in ("train", "valid", "test")] == [929_589, 73_760, 82_430]
    assert len(ptb.vocab) == 10_000
    assert ptb.spec.vocab_size == 10_000 and ptb.spec.task == "lm"
    # PTB already maps rare words to <unk>: valid/test contain no word outside the train vocabulary
    text = (DATA_DIR / "ptb" / "ptb.valid.txt").read_text().split()
    assert all(w in ptb.vocab.stoi for w in text)


def test_ptb_vocabulary_is_deterministic_and_frequency_ordered(ptb):
    again = PTBDataModule(str(DATA_DIR))
    again.setup()
    assert again.vocab.itos == ptb.vocab.itos
    assert ptb.vocab.itos[0] == "the"  # the most frequent word gets id 0
    first_line = (DATA_DIR / "ptb" / "ptb.train.txt").read_text().splitlines()[0].split()
    assert ptb.vocab.decode(ptb.streams["train"][: len(first_line) + 1]).split() == first_line + [EOS]


def test_shakespeare_char_split_is_first_90_percent():
    dm = ShakespeareCharDataModule(str(DATA_DIR))
    dm.setup()
    text = (DATA_DIR / "tiny_shakespeare" / "input.txt").read_text()
    assert len(text) == 1_115_394
    cut = int(len(text) * 0.9)
    assert dm.num_tokens("train") == cut and dm.num_tokens("valid") == len(text) - cut
    assert torch.equal(dm.streams["test"], dm.streams["valid"])  # no third split in the published setup
    assert len(dm.vocab) == 65
    assert dm.tokenizer.decode(dm.streams["train"][:14].tolist()) == text[:14]


def test_wikitext2_reads_the_release_layout():
    dm = WikiText2DataModule(str(FIXTURES))
    dm.setup()
    lines = (FIXTURES / "wikitext2" / "wiki.train.tokens").read_text().splitlines()
    assert dm.num_tokens("train") == sum(len(line.split()) + 1 for line in lines)  # <eos> on every line
    valid_words = (FIXTURES / "wikitext2" / "wiki.valid.tokens").read_text().split()
    assert "zebra" in valid_words and "zebra" not in dm.vocab.stoi
    assert dm.vocab.decode(dm.streams["valid"]).count(UNK) >= 1


def test_wikitext2_hub_rows_become_release_files(tmp_path, monkeypatch):
    rows = {"train": ["", " = A = \n", " words here . \n"], "validation": [" x y \n"], "test": ["", " z \n"]}

    class Split(dict):
        pass

    def fake_load(name, config):
        assert (name, config) == ("Salesforce/wikitext", "wikitext-2-v1")
        return {k: Split(text=v) for k, v in rows.items()}

    datasets = pytest.importorskip("datasets")  # the `hub` extra
    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    dm = WikiText2DataModule(str(tmp_path))
    dm.setup()
    assert (tmp_path / "wikitext2" / "wiki.train.tokens").read_text() == "\n = A = \n words here . \n"
    assert dm.num_tokens("train") == 1 + 4 + 4  # blank line -> <eos>; "= A =" + <eos>; "words here ." + <eos>


def test_wikitext2_offline_without_files_says_where_it_looked(tmp_path, monkeypatch):
    datasets = pytest.importorskip("datasets")  # the `hub` extra

    def offline(*a, **k):
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataNotFoundError, match=str(tmp_path / "wikitext2")):
        WikiText2DataModule(str(tmp_path)).setup()


def test_wikitext2_without_the_hub_extra_says_how_to_get_it(tmp_path, monkeypatch):
    """`datasets` is an extra: without it (here: its import fails), one sentence names the extra."""
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(DataNotFoundError) as err:
        WikiText2DataModule(str(tmp_path)).setup()
    message = str(err.value)
    assert 'pip install -e ".[hub]"' in message and str(tmp_path / "wikitext2") in message
    assert message.count(". ") == 0 and message.endswith(".")  # one sentence


@pytest.mark.parametrize("level", ["word", "char"])
def test_user_text_corpus(level):
    dm = TextDataModule(str(FIXTURES / "text"), "train.txt", "valid.txt", "test.txt", level=level)
    dm.setup()
    train = (FIXTURES / "text" / "train.txt").read_text()
    if level == "word":
        assert dm.num_tokens("train") == len(train.split()) + train.count("\n")
        assert "bird" not in dm.vocab.stoi  # valid-only word: not in the vocabulary ...
        assert dm.vocab.decode(dm.streams["valid"]).split().count(UNK) == 1  # ... read as <unk>
    else:
        assert dm.num_tokens("train") == len(train)
        assert dm.tokenizer.decode(dm.streams["train"].tolist()) == train
        assert UNK in dm.vocab.stoi and "b" not in dm.vocab.stoi  # "bird" in valid: b, i, r are unseen
        assert dm.tokenizer.decode(dm.streams["valid"].tolist()).count(UNK) == 3


def test_user_text_missing_file_is_one_sentence(tmp_path):
    dm = TextDataModule(str(tmp_path), "nope.txt", "valid.txt")
    with pytest.raises(DataNotFoundError) as err:
        dm.setup()
    message = str(err.value)
    assert "nope.txt" in message and str(tmp_path) in message and message.count("\n") == 0


def test_missing_corpus_tries_the_public_source_then_explains(tmp_path, monkeypatch):
    attempted = []

    def no_network(url, timeout):
        attempted.append(url)
        raise OSError("network unreachable")

    monkeypatch.setattr(files.urllib.request, "urlopen", no_network)
    with pytest.raises(DataNotFoundError) as err:
        PTBDataModule(str(tmp_path)).setup()
    assert attempted and attempted[0].startswith("https://")
    message = str(err.value)
    assert str(tmp_path / "ptb") in message and "SEQBENCH_DATA_DIR" in message and "\n" not in message


def test_download_is_verified_and_a_bad_download_is_not_kept(tmp_path, monkeypatch):
    import io

    class Response(io.BytesIO):
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    monkeypatch.setattr(files.urllib.request, "urlopen", lambda url, timeout: Response(b"not ptb"))
    with pytest.raises(ChecksumError):
        PTBDataModule(str(tmp_path)).setup()
    assert not list((tmp_path / "ptb").glob("ptb.*.txt"))


def test_corrupt_corpus_fails_checksum_and_is_left_untouched(tmp_path):
    folder = tmp_path / "ptb"
    shutil.copytree(DATA_DIR / "ptb", folder)
    for f in folder.iterdir():
        f.chmod(0o644)
    corrupt = folder / "ptb.valid.txt"
    corrupt.write_text(corrupt.read_text().replace("the", "teh", 1))
    before = corrupt.read_bytes()
    with pytest.raises(ChecksumError, match="ptb.valid.txt"):
        PTBDataModule(str(tmp_path)).setup()
    assert corrupt.read_bytes() == before  # a user's file is never overwritten or deleted


def test_pretrain_lm_joins_corpora_split_by_split_at_bpe_level():
    """data=pretrain_lm: the sentences of several corpora, <eos> after each line, BPE pieces from train."""
    from seqbench.data.pretrain_lm import PretrainLMDataModule
    from seqbench.data.sources import source_sentences

    dm = PretrainLMDataModule(str(DATA_DIR), source="sst2+conll2003", download=False, bpe_vocab=2000, lowercase=True)
    dm.setup()
    sentences = source_sentences("sst2+conll2003", DATA_DIR, download=False)
    assert len(sentences["train"]) == 6920 + 14041  # SST-2's sentences, then CoNLL's
    eos = dm.subword.eos_id
    for split in ("train", "valid", "test"):
        assert int((dm.streams[split] == eos).sum()) == len(sentences[split])
    first_line = dm.tokenizer.decode(dm.streams["test"][: int((dm.streams["test"] == eos).nonzero()[0])].tolist())
    assert first_line == sentences["test"][0].lower()  # SST-2's first test sentence, round-tripped
    assert dm.spec.vocab_size == 2000


def test_an_unknown_pretraining_source_fails_naming_the_choices():
    from seqbench.data.sources import source_names
    from seqbench.errors import ConfigError

    assert source_names("ptb+multi30k") == source_names(["ptb", "multi30k"]) == ["ptb", "multi30k"]
    with pytest.raises(ConfigError, match="unknown corpus.*'imdb'.*choose from ptb"):
        source_names("ptb+imdb")


def test_a_bpe_corpus_can_take_a_stored_tokenizer(tmp_path):
    """data.tokenizer_from: continued pre-training reads the text as the same ids the checkpoint knows
    (a retrained BPE would not give them: HF trainers differ from run to run); word level refuses."""
    from seqbench.data.pretrain_lm import PretrainLMDataModule
    from seqbench.errors import ConfigError

    first = PretrainLMDataModule(str(DATA_DIR), source="sst2", download=False, bpe_vocab=1000, lowercase=True)
    first.setup()
    first.subword.tokenizer.save(str(tmp_path / "bpe.json"))
    again = PretrainLMDataModule(str(DATA_DIR), source="sst2", download=False, bpe_vocab=1000,
                                 tokenizer_from=str(tmp_path / "bpe.json"))
    again.setup()
    assert again.vocab.itos == first.vocab.itos
    for split in ("train", "valid", "test"):
        assert torch.equal(again.streams[split], first.streams[split])
    with pytest.raises(ConfigError, match="needs data.level=bpe"):
        PretrainLMDataModule(str(DATA_DIR), source="sst2", level="word", tokenizer_from=str(tmp_path / "bpe.json"))
