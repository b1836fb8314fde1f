"""Bad input fails before any work in one sentence; odd but valid text files are read correctly.

Every numeric option a user sets (sizes, rates, dropouts, gaps, batch sizes, decoding lengths, beam
size) is range-checked with the config (seqbench.training.config_check) — a negative batch size once ended in
a RuntimeError traceback from PyTorch. User text files: CRLF and CR line ends count the same lines as
LF; bytes that are not UTF-8 and files without text end in a sentence.
"""

from __future__ import annotations

import pytest

from conftest import run_cli
from seqbench.training.config_check import check_config
from seqbench.data.text import TextDataModule
from seqbench.errors import ConfigError, DataFormatError

BAD = [
    (["data.batch_size=-4"], "data.batch_size must be at least 1, got -4"),
    (["data.eval_batch_size=0"], "data.eval_batch_size must be at least 1"),
    (["data.bptt=0"], "data.bptt must be at least 1"),
    (["model.hidden_size=0"], "model.hidden_size must be at least 1"),
    (["model.num_layers=-1"], "model.num_layers must be at least 1"),
    (["model.dropout=1.5"], "model.dropout must be in [0, 1)"),
    (["model.dropout=1.0"], "model.dropout must be in [0, 1)"),
    (["model.embedding_dropout=-0.1"], "model.embedding_dropout must be in [0, 1)"),
    (["model.optimizer.lr=-1"], "model.optimizer.lr must be positive"),
    (["model.optimizer.lr=0"], "model.optimizer.lr must be positive"),
    (["model=gpt", "model.n_head=0"], "model.n_head must be at least 1"),
    (["model=gpt", "model.context=0"], "model.context must be at least 1"),
    (["model=gpt", "model.optimizer.weight_decay=-0.1"], "model.optimizer.weight_decay must be 0 or more"),
    (["data=copy", "data.T=0"], "data.T must be at least 1"),
    (["data=adding", "data.T=-3"], "data.T must be at least 1"),
    (["data=multi30k", "data.beam_size=0"], "data.beam_size must be at least 1"),
    (["data=multi30k", "data.max_len_a=-1"], "data.max_len_a must be 0 or more"),
    (["data=multi30k", "data.max_len_b=-2"], "data.max_len_b must be 0 or more"),
    (["data=multi30k", "data.max_train_len=0"], "data.max_train_len must be at least 1"),
    (["data=multi30k", "model=transformer", "model.label_smoothing=1"], "model.label_smoothing must be in [0, 1)"),
    (["data=multi30k", "model.teacher_forcing=1.2"], "model.teacher_forcing must be in [0, 1]"),
    (["data=pretrain_text", "model=bert", "data.mask_prob=0"], "data.mask_prob must be in (0, 1]"),
    (["data=sst2", "data.unk_replace=1.0"], "data.unk_replace must be in [0, 1)"),
]


@pytest.mark.parametrize("overrides,sentence", BAD, ids=[" ".join(o) for o, _ in BAD])
def test_an_out_of_range_option_fails_in_one_sentence_before_any_work(cfg_factory, overrides, sentence):
    cfg = cfg_factory(overrides, tiny=False)
    with pytest.raises(ConfigError) as err:
        check_config(cfg)
    assert sentence in str(err.value) and "\n" not in str(err.value)


def test_the_edges_of_each_range_are_accepted(cfg_factory):
    check_config(cfg_factory(["model.dropout=0", "model.optimizer.lr=1e-9", "data.batch_size=1"], tiny=False))
    check_config(cfg_factory(["data=multi30k", "model.teacher_forcing=1", "data.max_len_a=0", "data.beam_size=1"],
                             tiny=False))


def test_a_negative_batch_size_on_the_command_line_is_one_sentence_and_no_traceback(tmp_path):
    r = run_cli(["data.batch_size=-4", "debug=fast"], tmp_path)
    assert r.returncode == 1
    assert "Error: data.batch_size must be at least 1, got -4." in r.stderr and "Traceback" not in r.stderr


# -- the user's text files ---------------------------------------------------------------------
def _streams(folder, level: str, files: dict[str, bytes]) -> dict:
    for name, content in files.items():
        (folder / name).write_bytes(content)
    dm = TextDataModule(str(folder), train_file=str(folder / "train.txt"), valid_file=str(folder / "valid.txt"),
                        level=level)
    dm.setup("fit")
    return {split: [dm.vocab.itos[i] for i in stream.tolist()] for split, stream in dm.streams.items()}


TEXT = "the cat sat\non the mat\n\nthe end\n"


@pytest.mark.parametrize("level", ["word", "char"])
@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_crlf_and_cr_line_ends_give_the_streams_of_lf(tmp_path, level, ending):
    (tmp_path / "lf").mkdir()
    (tmp_path / "other").mkdir()
    lf = _streams(tmp_path / "lf", level, {"train.txt": TEXT.encode(), "valid.txt": TEXT.encode()})
    converted = TEXT.replace("\n", ending).encode()
    other = _streams(tmp_path / "other", level, {"train.txt": converted, "valid.txt": converted})
    assert other == lf
    if level == "word":  # one <eos> per line, blank lines included: 4 lines
        assert len(lf["train"]) == len(TEXT.split()) + 4


def test_a_file_that_is_not_utf8_is_named_in_one_sentence(tmp_path):
    (tmp_path / "train.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (tmp_path / "valid.txt").write_text("ok\n")
    dm = TextDataModule(str(tmp_path), train_file=str(tmp_path / "train.txt"), valid_file=str(tmp_path / "valid.txt"))
    with pytest.raises(DataFormatError, match=r"train\.txt is not UTF-8 text \(byte 0xe9 at offset 3\); convert it"):
        dm.setup("fit")


@pytest.mark.parametrize("content", [b"", b"\n\n   \n\t\n"])
def test_an_empty_or_blank_file_is_named_in_one_sentence(tmp_path, content):
    (tmp_path / "train.txt").write_text("some text\n")
    (tmp_path / "valid.txt").write_bytes(content)
    dm = TextDataModule(str(tmp_path), train_file=str(tmp_path / "train.txt"), valid_file=str(tmp_path / "valid.txt"))
    with pytest.raises(DataFormatError, match=r"data\.valid_file=.*valid\.txt holds no text"):
        dm.setup("fit")
