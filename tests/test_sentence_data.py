"""SST-2 and CoNLL-2003 as the project reads them: published sizes, schemes, batches, bad lines."""

from __future__ import annotations

import pytest
import torch

from conftest import DATA_DIR
from seqbench.data.conll2003 import CoNLL2003DataModule, read_conll
from seqbench.data.sst2 import SST2DataModule, read_sst
from seqbench.data.streams import IGNORE_INDEX
from seqbench.errors import DataFormatError, DataNotFoundError
from seqbench.metrics.spans import chunks



def test_conll_wrong_column_count_names_file_and_line(tmp_path):
    path = tmp_path / "eng.train"
    path.write_text("-DOCSTART- -X- O O\n\nEU NNP I-NP I-ORG\nrejects VBZ I-VP\n")
    with pytest.raises(DataFormatError, match=rf"{path}:4: expected 4 columns .* found 3"):
        read_conll(path)


def test_conll_docstart_is_not_a_sentence(tmp_path):
    path = tmp_path / "x"
    path.write_text("-DOCSTART- -X- O O\n\nA B C I-PER\n\n-DOCSTART- -X- -X- O\nD E F O\nG H I I-LOC\n")
    assert [[r[0] for r in s] for s in read_conll(path)] == [["A"], ["D", "G"]]


def test_sst_bad_line_names_file_and_line(tmp_path):
    path = tmp_path / "stsa.binary.train"
    path.write_text("1 good film\n2 what\n")
    with pytest.raises(DataFormatError, match=rf"{path}:2"):
        read_sst(path)


@pytest.mark.parametrize("hook", ["prepare_data", "setup"])
def test_missing_corpus_is_one_sentence(tmp_path, hook):
    with pytest.raises(DataNotFoundError, match=str(tmp_path / "sst2")):
        getattr(SST2DataModule(str(tmp_path), download=False), hook)()


def test_a_fit_then_a_test_parse_the_corpus_once(monkeypatch):
    # bug caught: prepare_data parsing every split to verify the files, which Lightning calls before each
    # fit and test: CoNLL-2003 read two or three times per run (seconds each, 17 s of every tagger pair's
    # one-step matrix test)
    import seqbench.data.conll2003 as conll

    reads = []
    real = conll.read_conll
    monkeypatch.setattr(conll, "read_conll", lambda path, *a: reads.append(path) or real(path, *a))
    data = CoNLL2003DataModule(str(DATA_DIR), download=False)
    for stage in ("fit", "test"):  # the hooks in the order Lightning calls them for trainer.fit, then .test
        data.prepare_data()
        data.setup(stage)
    assert len(reads) == 3 and len(set(reads)) == 3  # train, testa, testb, once each


@pytest.mark.corpus("conll2003")
def test_conll_sizes_schemes_and_batches():
    data = CoNLL2003DataModule(str(DATA_DIR), tag_scheme="bioes", download=False)
    data.setup()
    assert [len(data.examples[s]) for s in ("train", "valid", "test")] == [14041, 3250, 3453]
    assert sum(len(w) for w, _ in data.examples["train"]) == 203621
    names = data.spec.extras["tag_names"]
    assert names[0] == "O" and "S-PER" in names and "E-ORG" in names
    # the file's IOB1 chunks survive the conversion: same chunks before and after
    raw = [r[3] for r in read_conll(DATA_DIR / "conll2003" / "eng.train")[0]]
    assert chunks(raw) == chunks(data.examples["train"][0][1])
    batch = next(iter(data.val_dataloader()))
    B, T = batch["input"].shape
    assert batch["tags"].shape == (B, T) and batch["chars"].shape[:2] == (B, T)
    pad = torch.arange(T)[None, :] >= batch["lengths"][:, None]
    assert (batch["tags"][pad] == IGNORE_INDEX).all() and (batch["input"][pad] == 0).all()
    pos = CoNLL2003DataModule(str(DATA_DIR), label="pos", download=False)
    pos.setup()
    assert "NNP" in pos.spec.extras["tag_names"] and "tag_scheme" not in pos.spec.extras


@pytest.mark.corpus("sst2")
def test_sst2_sizes_and_classes():
    data = SST2DataModule(str(DATA_DIR), download=False)
    data.setup()
    assert [len(data.examples[s]) for s in ("train", "valid", "test")] == [6920, 872, 1821]
    assert data.spec.num_classes == 2 and data.spec.task == "classification"
    batch = next(iter(data.test_dataloader()))
    assert set(batch["label"].tolist()) <= {0, 1}


@pytest.mark.corpus("sst2")
def test_singleton_replacement_only_touches_training_singletons():
    data = SST2DataModule(str(DATA_DIR), unk_replace=1.0, download=False)
    data.setup()
    examples = data.examples["train"][:64]
    train = data.collate(examples, train=True)["input"]
    plain = data.collate(examples, train=False)["input"]
    changed = train != plain
    assert changed.any() and data.singletons[plain[changed]].all()
    assert (train[changed] == data.vocab.stoi["<unk>"]).all()
