"""enwik8 at byte level: the published file and split (sizes and sha256 of SOURCE.md), bytes in and out
unchanged, the LM base's stream and window batches over byte streams, the evaluation slices and their record,
the download of the Hutter Prize archive (a fake one), and the one sentence when the file is missing."""

from __future__ import annotations

import csv
import hashlib
import io
import math
import re
import zipfile

import numpy as np
import pytest
import torch

from conftest import DATA_DIR
from seqbench.data import enwik8, files
from seqbench.data.enwik8 import ByteTokenizer, Enwik8DataModule
from seqbench.data.streams import IGNORE_INDEX, StreamWindows, stream_columns
from seqbench.data.windows import EvalWindows, TrainWindows
from seqbench.errors import ChecksumError, ConfigError, DataNotFoundError

SMALL = {"eval_bytes_valid": 4096, "eval_bytes_test": 8192}


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return enwik8.read_bytes(enwik8.locate(DATA_DIR / "enwik8", download=False))


@pytest.fixture(scope="module")
def sliced() -> Enwik8DataModule:
    dm = Enwik8DataModule(str(DATA_DIR), download=False, **SMALL)
    dm.setup()
    return dm


def _source_table() -> dict[str, tuple[int, str]]:
    """SOURCE.md's split table: {split: (bytes, sha256)}."""
    text = (DATA_DIR / "enwik8" / "SOURCE.md").read_text()
    rows = re.findall(r"^\| (train|valid|test) \([^)]*\) \| ([\d,]+) \| ([0-9a-f]{64}) \|$", text, re.M)
    return {name: (int(size.replace(",", "")), digest) for name, size, digest in rows}


@pytest.mark.corpus("enwik8")
def test_the_split_is_the_published_one_byte_for_byte(data):
    # bug caught: a split boundary moved (valid starting a region early or late), which no size check sees
    table = _source_table()
    assert set(table) == {"train", "valid", "test"}
    parts = enwik8.split(data)
    for name, part in parts.items():
        assert (part.size, hashlib.sha256(part).hexdigest()) == table[name], name
    assert sum(p.size for p in parts.values()) == data.size == 100_000_000
    assert np.count_nonzero(np.bincount(data, minlength=256)) == 205  # SOURCE.md: 205 distinct byte values


@pytest.mark.corpus("enwik8")
def test_bytes_go_in_and_come_out_unchanged(sliced, data):
    # the ids are the bytes: the stream is the file, and the tokenizer gives back the text, UTF-8 included
    first = bytes(data[:300])
    assert sliced.streams["train"][:300].tolist() == list(first)
    assert sliced.tokenizer.decode(sliced.streams["train"][:300].tolist()) == first.decode("utf-8")
    assert sliced.spec.vocab_size == len(sliced.vocab) == 256 and sliced.spec.eos_id is None
    assert sliced.vocab.itos[ord("<")] == "<"  # id = byte: no vocabulary built from train
    text = "Zürich – 東京 <page>\n"
    ids = ByteTokenizer().encode(text)
    assert ids.tolist() == list(text.encode("utf-8")) and ByteTokenizer().decode(ids.tolist()) == text


@pytest.mark.corpus("enwik8")
def test_the_evaluation_slices_are_the_first_bytes_of_their_split_and_are_recorded(sliced, data):
    # bug caught: eval_bytes ignored (the whole 5M-byte split scored on every validation, and a record
    # claiming a slice), or the slice taken from train's end or another split
    parts = enwik8.split(data)
    assert sliced.num_tokens("valid") == 4096 and sliced.num_tokens("test") == 8192
    assert sliced.streams["valid"].tolist() == parts["valid"][:4096].tolist()
    assert sliced.streams["test"].tolist() == parts["test"][:8192].tolist()
    assert sliced.num_tokens("train") == 90_000_000 and sliced.streams["train"].dtype == torch.uint8

    class Recurrent:
        lm_batching = "stream"

    record = sliced.eval_context(Recurrent())
    assert record["eval/valid_bytes"] == 4096 and record["eval/test_bytes"] == 8192
    assert record["eval/column_tokens"] == 8192 // sliced.eval_batch_size


@pytest.mark.parametrize("value", [1, 5_000_001, True, 2.5])
def test_an_evaluation_slice_outside_the_split_is_refused_in_one_sentence(value, tmp_path):
    with pytest.raises(ConfigError, match=r"data.eval_bytes_test must be null .* got") as err:
        Enwik8DataModule(str(tmp_path), eval_bytes_test=value)
    assert "\n" not in str(err.value)


@pytest.mark.corpus("enwik8")
def test_byte_streams_give_the_batches_an_int64_stream_gives(sliced):
    # the training split stays uint8 (90 MB, not 720 MB); the loaders must serve the same int64 batches
    train = sliced.streams["train"][:50_001]
    wide = train.long()
    for rank in range(2):
        narrow, reference = StreamWindows(train, 8, 128, rank, 2), StreamWindows(wide, 8, 128, rank, 2)
        for a, b in zip(narrow, reference):
            assert a["input"].dtype == a["target"].dtype == torch.long
            assert torch.equal(a["input"], b["input"]) and torch.equal(a["target"], b["target"])
    inputs, targets = stream_columns(wide, 8)  # the layout of the streams' picture
    first = next(iter(StreamWindows(train, 8, 128)))
    assert torch.equal(first["input"], inputs[:, :128]) and torch.equal(first["target"], targets[:, :128])
    a, b = next(iter(TrainWindows(train, 4, 256, seed=3))), next(iter(TrainWindows(wide, 4, 256, seed=3)))
    assert a["input"].dtype == torch.long and torch.equal(a["input"], b["input"]) and torch.equal(a["target"], b["target"])
    assert torch.equal(a["input"][:, 1:], a["target"][:, :-1])  # targets: the next byte


@pytest.mark.corpus("enwik8")
def test_the_sliding_evaluation_scores_every_byte_of_the_slice_once(sliced):
    valid = sliced.streams["valid"]
    scored = torch.cat([b["target"][b["target"] != IGNORE_INDEX] for b in EvalWindows(valid, 10, 256, 128)])
    assert torch.equal(scored, valid[1:])  # 4,095 targets of 4,096 bytes, in order, once each


def _zip(member: str, payload: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr(member, payload)
    return buffer.getvalue()


class _Response(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _serve(monkeypatch, body: bytes) -> list[str]:
    asked: list[str] = []

    def urlopen(url, timeout):
        asked.append(url)
        return _Response(body)

    monkeypatch.setattr(files.urllib.request, "urlopen", urlopen)
    return asked


def test_without_the_file_the_archive_is_downloaded_unzipped_and_verified(tmp_path, monkeypatch):
    # a fake corpus: the real archive is 36 MB and there is no network in the test run
    fake = bytes(range(256)) * 40
    monkeypatch.setattr(enwik8, "RAW", enwik8.CorpusFile("enwik8", hashlib.sha256(fake).hexdigest(), enwik8.URL,
                                                         member="enwik8"))
    asked = _serve(monkeypatch, _zip("enwik8", fake))
    folder = tmp_path / "enwik8"
    path = enwik8.locate(folder)
    assert asked == ["http://mattmahoney.net/dc/enwik8.zip"]
    assert path == folder / "enwik8" and path.read_bytes() == fake
    assert sorted(p.name for p in folder.iterdir()) == [".seqbench.lock", "enwik8"]  # no archive, no partial file
    assert bytes(enwik8.read_bytes(path)) == fake
    assert enwik8.locate(folder) == path and len(asked) == 1  # found the second time: not fetched again


def test_a_download_that_is_not_the_published_file_is_not_kept(tmp_path, monkeypatch):
    _serve(monkeypatch, _zip("enwik8", b"not enwik8"))
    with pytest.raises(ChecksumError, match="enwik8"):
        enwik8.locate(tmp_path / "enwik8")
    assert not (tmp_path / "enwik8" / "enwik8").exists()
    _serve(monkeypatch, _zip("README", b"an archive without the file"))
    with pytest.raises(DataNotFoundError, match="not a zip archive holding enwik8"):
        enwik8.locate(tmp_path / "enwik8")
    assert sorted(p.name for p in (tmp_path / "enwik8").iterdir()) == [".seqbench.lock"]


def test_a_missing_file_is_one_sentence_naming_the_folder_and_both_forms(tmp_path, monkeypatch):
    def offline(url, timeout):
        raise OSError("network unreachable")

    monkeypatch.setattr(files.urllib.request, "urlopen", offline)
    for download in (True, False):
        with pytest.raises(DataNotFoundError) as err:
            Enwik8DataModule(str(tmp_path), download=download).setup()
        message = str(err.value)
        assert str(tmp_path / "enwik8") in message and "enwik8 (or enwik8.gz)" in message
        assert "SEQBENCH_DATA_DIR" in message and "\n" not in message and message.count(". ") == 0


def test_a_corrupt_copy_fails_its_checksum_and_is_left_alone(tmp_path):
    folder = tmp_path / "enwik8"
    folder.mkdir()
    (folder / "enwik8.gz").write_bytes(b"\x1f\x8b not the file")
    with pytest.raises(ChecksumError, match=r"enwik8\.gz"):
        Enwik8DataModule(str(tmp_path)).setup()
    assert (folder / "enwik8.gz").read_bytes() == b"\x1f\x8b not the file"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> tuple:
    """A two-step LSTM run on enwik8, through src/train.py's code, validated once at its end on the first
    2,048 bytes of valid (its best checkpoint holds the weights that validation scored)."""
    from omegaconf import OmegaConf

    from conftest import compose_cfg, require_corpus
    from seqbench.training.run import train

    require_corpus("enwik8")
    run = tmp_path_factory.mktemp("tiny_run")
    cfg = compose_cfg(["model=lstm", "data=enwik8", "model.hidden_size=8", "logger=csv", "trainer=cpu",
                       "trainer.max_steps=2", "trainer.max_epochs=-1", "trainer.val_check_interval=2",
                       "trainer.check_val_every_n_epoch=null", "trainer.num_sanity_val_steps=0",
                       "data.eval_bytes_valid=2048", "data.eval_bytes_test=3000", "~callbacks.step_checkpoint"], run)
    metrics = train(cfg, run)
    (run / ".hydra").mkdir()
    OmegaConf.save(cfg, run / ".hydra" / "config.yaml")  # what Hydra leaves in a run's folder
    return run, metrics


@pytest.mark.corpus("enwik8")
def test_a_run_logs_bits_per_byte_and_the_bytes_it_evaluated(tiny_run):
    # end to end through src/train.py's code: val/bpc and test/bpc are the logged loss / ln 2, and the
    # record says which bytes were scored
    _, metrics = tiny_run
    for stage in ("val", "test"):
        assert math.isclose(metrics[f"{stage}/bpc"], metrics[f"{stage}/loss"] / math.log(2), rel_tol=1e-6)
    assert metrics["eval/valid_bytes"] == 2048 and metrics["eval/test_bytes"] == 3000


@pytest.mark.corpus("enwik8")
def test_eval_slices_scores_each_disjoint_slice_as_a_run_scores_its_slice(tiny_run, tmp_path):
    # slice 0 of 2,048 bytes is the run's own validation slice, so its bpc is the run's val/bpc; the
    # slices are consecutive and disjoint. Bugs caught: slices overlapping or scored with another
    # slice's state, the slice's loss read in nats
    from seqbench.analysis import eval_slices

    run, metrics = tiny_run
    text = eval_slices.main([str(run), "--bytes", "1024,2048", "--within", "4096", "--out", str(tmp_path)])
    rows = list(csv.DictReader(open(tmp_path / "slices.csv")))
    assert [(int(r["slice_bytes"]), int(r["slice"])) for r in rows] == [(1024, k) for k in range(4)] + [(2048, 0), (2048, 1)]
    first = next(r for r in rows if r["slice_bytes"] == "2048" and r["slice"] == "0")
    assert math.isclose(float(first["bpc"]), metrics["val/bpc"], rel_tol=1e-5)
    assert "| lstm | 1,024 | 4 |" in text and (tmp_path / "record.json").is_file()


def test_eval_slices_summary_is_the_spread_over_slices_and_of_paired_differences():
    from seqbench.analysis.eval_slices import summary

    rows = [{"family": f, "slice_bytes": 10, "slice": k, "bpc": b, "cpu_s": 1.0}
            for f, bpcs in (("a", [1.0, 2.0, 3.0]), ("b", [1.5, 2.5, 3.7])) for k, b in enumerate(bpcs)]
    spread, paired = summary(rows)
    assert [(r["family"], r["slices"], r["mean_bpc"], r["sd_bpc"]) for r in spread] == [("a", 3, 2.0, 1.0),
                                                                                      ("b", 3, pytest.approx(2.56667, abs=1e-5),
                                                                                       pytest.approx(1.1015, abs=1e-4))]
    (pair,) = paired
    assert pair["pairs"] == 1 and pair["max_sd_difference"] == pytest.approx(0.11547, abs=1e-5)  # sd of 0.5, 0.5, 0.7
