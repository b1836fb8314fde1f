"""Every mistake a user can make ends in one clear sentence, before training, with nothing lost."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import DATA_DIR, run_cli
from seqbench.training.config_check import check_config
from seqbench.errors import ConfigError
from seqbench.nn.cells import GATES
from seqbench.training.run import train


def _one_sentence(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr, stderr
    return lines[0]


def test_unknown_model_name_lists_the_choices(tmp_path):
    out = run_cli(["model=lstmm"], tmp_path)
    assert out.returncode != 0
    assert "Could not find 'model/lstmm'" in out.stderr and "lstm" in out.stderr and "gru" in out.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*.ckpt"))


def test_unknown_data_name_lists_the_choices(tmp_path):
    out = run_cli(["data=pennn"], tmp_path)
    assert out.returncode != 0 and "Could not find 'data/pennn'" in out.stderr and "ptb" in out.stderr


def test_bad_override_type_fails_before_any_data_or_training(tmp_path):
    out = run_cli(["model.hidden_size=abc", "logger=csv"], tmp_path)
    assert out.returncode == 1
    line = _one_sentence(out.stderr)
    assert "model.hidden_size must be an integer, got 'abc'" in line
    assert not list(tmp_path.rglob("*.ckpt"))
    (metrics,) = tmp_path.rglob("metrics.json")
    assert json.loads(metrics.read_text())["status"] == "failed"


def test_missing_corpus_names_where_it_looked(tmp_path):
    empty = tmp_path / "nodata"
    out = run_cli([f"data.data_dir={empty}", "data.download=false", "logger=csv"], tmp_path)
    assert out.returncode == 1
    line = _one_sentence(out.stderr)
    assert str(empty / "ptb") in line and "data.download=false" in line


def test_missing_checkpoint_fails_before_training(tmp_path):
    out = run_cli(["ckpt_path=/nope/last.ckpt", "logger=csv"], tmp_path)
    assert out.returncode == 1
    assert "ckpt_path=/nope/last.ckpt does not exist" in _one_sentence(out.stderr)
    assert not list(tmp_path.rglob("*.ckpt"))


@pytest.mark.parametrize("override,message", [
    ("+model.hiden_size=3", "model.hiden_size is not an option"),
    ("model.cell=transformer", f"model.cell must be one of {', '.join(GATES)}"),
    ("model.dropout=high", "model.dropout must be a number"),
    ("trainer.max_epochs=1.5", "trainer.max_epochs must be"),
    ("data.bptt=true", "data.bptt must be an integer"),
])
def test_config_mistakes_are_caught_by_the_signature_check(override, message, cfg_factory):
    cfg = cfg_factory([override])
    with pytest.raises(ConfigError, match=message):
        check_config(cfg)


def test_unsupported_model_data_pair_names_the_supported_tasks(cfg_factory, tmp_path):
    # GPT is decoder-only: it has no encoder-decoder for translation
    cfg = cfg_factory(["model=gpt", "data._target_=fakes.FakeTranslationData"], tiny=False)
    with pytest.raises(ConfigError, match=r"model=gpt cannot be trained on data=fakemt.*task 'translation'.*supports lm, classification"):
        check_config(cfg, {"model": "gpt", "data": "fakemt"})


def test_corrupt_file_fails_before_training_and_keeps_the_previous_run(cfg_factory, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DATA_DIR / "ptb", data / "ptb")
    (data / "ptb" / "ptb.test.txt").chmod(0o644)
    (data / "ptb" / "ptb.test.txt").write_text("corrupted\n")
    earlier = tmp_path / "checkpoints" / "last.ckpt"
    earlier.parent.mkdir()
    earlier.write_bytes(b"an earlier run's checkpoint")
    cfg = cfg_factory([f"data.data_dir={data}"])
    from seqbench.errors import ChecksumError

    with pytest.raises(ChecksumError, match="ptb.test.txt"):
        train(cfg, tmp_path)
    assert earlier.read_bytes() == b"an earlier run's checkpoint"
