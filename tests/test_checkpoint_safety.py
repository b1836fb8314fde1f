"""A checkpoint that would run code is refused in one sentence at every entry point, and never runs.

The payload is the one from the bug report: a pickle whose `__reduce__` calls `os.system` (here
`touch <marker>`). Each entry point that reads a checkpoint — `ckpt_path=` of src/train.py and
src/eval.py, `model.pretrained`, `data.tokenizer_from`, and the analysis commands — gets it; each
must end in one sentence naming the converter, and the marker file must not exist afterwards.
The fixture itself is checked live: loading it the unsafe way does create the marker.
"""

from __future__ import annotations

import json
import os

import pytest
import torch

from conftest import TINY, compose_cfg, run_cli
from seqbench.checkpoints import NotACheckpointError, UnsafeCheckpointError, load_checkpoint
from seqbench.entry import guarded, run_command


class Payload:
    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.fixture
def payload(tmp_path):
    """(a .ckpt in Lightning's layout whose unpickling runs `touch marker`, the marker path)."""
    marker = tmp_path / "PAYLOAD_RAN"
    path = tmp_path / "shared.ckpt"
    torch.save({"state_dict": {}, "seqbench_pretrained": {"family": "gpt", "hook": Payload(marker)}}, path)
    return path, marker


def _refused(err: str, path) -> None:
    """One `Error:` line naming the file and the converter, and no traceback of torch's refusal.

    (In-process, a log handler left over from an earlier test may print "--- Logging error ---"
    with a traceback of its own; the subprocess tests check for no traceback at all.)"""
    lines = [line for line in err.strip().splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1 and "UnpicklingError" not in err, err
    assert str(path) in lines[0] and "may run code" in lines[0], lines[0]
    assert f"python -m seqbench.training.convert_checkpoint {path} <new.ckpt>" in lines[0], lines[0]


def test_the_payload_is_live_when_loaded_the_unsafe_way(payload):
    path, marker = payload
    torch.load(path, weights_only=False)  # what model.pretrained did before
    assert marker.exists()


def test_model_pretrained_as_in_the_report(payload, tmp_path):
    path, marker = payload
    out = run_cli(["model=gpt", "data=sst2", f"model.pretrained={path}", "logger=csv"], tmp_path)
    assert out.returncode == 1
    _refused(out.stderr, path)
    assert f"model.pretrained={path}" in out.stderr and "(posix.system)" in out.stderr
    assert not marker.exists()


@pytest.mark.parametrize("option", ["ckpt_path", "model.pretrained", "data.tokenizer_from"])
def test_train_refuses_before_any_work(option, payload, tmp_path, capsys, monkeypatch):
    import seqbench.training.run as run

    path, marker = payload
    instantiate = run.instantiate  # refused with the config check, before a corpus is read (minutes on a large one)
    monkeypatch.setattr(run, "instantiate", lambda node, where, **kw: pytest.fail("the data was read first")
                        if where == "data" else instantiate(node, where, **kw))
    overrides = {"ckpt_path": ["model=lstm", "data=ptb"], "model.pretrained": ["model=bert", "data=sst2"],
                 "data.tokenizer_from": ["model=bert", "data=pretrain_text"]}[option]
    cfg = compose_cfg(TINY + overrides + [f"{option}={path}"], tmp_path)
    with pytest.raises(SystemExit):
        guarded(run.train, cfg, tmp_path, multirun=False)
    _refused(capsys.readouterr().err, path)
    assert not marker.exists()
    assert json.loads((tmp_path / "metrics.json").read_text())["status"] == "failed"
    assert not list(tmp_path.rglob("*.ckpt.tmp")) and not (tmp_path / "checkpoints").exists()


def test_eval_refuses(payload, tmp_path, capsys):
    from seqbench.training.evaluate import evaluate

    path, marker = payload
    cfg = compose_cfg([f"ckpt_path={path}", "trainer=cpu"], tmp_path, config_name="eval")
    with pytest.raises(SystemExit):
        guarded(evaluate, cfg, tmp_path, multirun=False)
    _refused(capsys.readouterr().err, path)
    assert not marker.exists()


def test_the_loaders_refuse_when_called_directly(payload):
    """The modules' own loaders, for code that builds a model without the config check."""
    from seqbench.data.stored_tokenizer import load_tokenizer
    from seqbench.models.pretrained import load_pretrained

    path, marker = payload
    with pytest.raises(UnsafeCheckpointError, match="model.pretrained="):
        load_pretrained(str(path), "gpt")
    with pytest.raises(UnsafeCheckpointError, match="data.tokenizer_from="):
        load_tokenizer(str(path))
    assert not marker.exists()


def _sweep_with(path, root, family="gru", T=20):
    """A finished long_range job whose tested checkpoint is `path`, as the analysis commands find one."""
    job = root / family
    job.mkdir(parents=True)
    (job / "metrics.json").write_text(json.dumps({"status": "completed", "overrides": f"data.T={T}",
                                                  "tested_checkpoint": str(path)}))
    return root


def _lm_run_with(path, root):
    """A language-model run directory (its saved config reads a real corpus) whose last.ckpt is `path`,
    as context_usage finds one: the refusal must come before the data is read and the file unpickled."""
    import shutil

    from omegaconf import OmegaConf

    from conftest import FIXTURES, TINY_RNN

    text = [f"data.{split}_file={FIXTURES / 'text' / f'{split}.txt'}" for split in ("train", "valid", "test")]
    cfg = compose_cfg([*TINY, *TINY_RNN, "model=lstm", "data=text", *text], root)
    (root / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, root / ".hydra" / "config.yaml")
    (root / "checkpoints").mkdir()
    return shutil.copy(path, root / "checkpoints" / "last.ckpt")


# every command that reads a checkpoint (grep load_weights / load_checkpoint / check_checkpoint in
# src/seqbench/analysis); src/train.py and src/eval.py are tested above
# the modules named in full, so that the README's command lines find the test that runs them
@pytest.mark.parametrize("command", ["seqbench.analysis.gradient_flow", "seqbench.analysis.pictures",
                                     "seqbench.analysis.copy_positions", "seqbench.analysis.alignments",
                                     "seqbench.analysis.vit_pictures", "seqbench.analysis.context_usage"])
def test_analysis_commands_refuse(command, payload, tmp_path, capsys):
    import importlib

    path, marker = payload
    command = command.rsplit(".", 1)[-1]
    if command == "context_usage":  # a run directory of its own, given as a .ckpt inside it
        path = _lm_run_with(path, tmp_path / "lm_run")
    sweep = str(_sweep_with(path, tmp_path / "sweep"))
    argv = {"gradient_flow": ["--T", "20", "--families", "gru", "--runs", sweep, "--wandb", "disabled",
                              "--out", str(tmp_path / "out")],
            "pictures": ["attention", "--T", "20", "--families", "gru", "--runs", sweep, "--wandb", "disabled",
                         "--out", str(tmp_path / "out")],
            "copy_positions": [sweep, "--T", "20", "--families", "gru"],
            "alignments": [str(tmp_path), "--ckpt", str(path)],
            "vit_pictures": [str(path), "--out", str(tmp_path / "out")],
            "context_usage": [str(path), "--out", str(tmp_path / "out")]}[command]
    main = importlib.import_module(f"seqbench.analysis.{command}").main
    with pytest.raises(SystemExit):
        run_command(main, argv)
    _refused(capsys.readouterr().err, path)
    assert not marker.exists()


def test_a_file_that_is_no_checkpoint_is_one_sentence_too(tmp_path):
    text = tmp_path / "notes.ckpt"
    text.write_text("not a checkpoint")
    with pytest.raises(NotACheckpointError, match="is not a checkpoint torch can read"):
        load_checkpoint(text, f"ckpt_path={text}")
    out = run_cli([f"ckpt_path={text}", "logger=csv"], tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"Error: ckpt_path={text} is not a checkpoint torch can read" in out.stderr


# -- checkpoints of an older writer: refused with the converter's command, converted, then loaded --
SENTENCES = ["the cat sat on the mat", "a dog ran in the park", "cats and dogs are friends"] * 4


def _bert_checkpoints(tmp_path):
    """(the model, its checkpoint as seqbench writes it, the same checkpoint as an older writer pickled
    it: tokenizer as a `tokenizers` object, hyperparameters as an OmegaConf container with Lightning's
    `hparams_type`, numpy's RNG state as an array)."""
    from functools import partial

    import numpy as np
    from omegaconf import DictConfig, OmegaConf

    from seqbench.data.pretrain_text import train_wordpiece
    from seqbench.data.spec import TaskSpec
    from seqbench.models.bert import BertModel
    from seqbench.models.pretrained import KEY

    tokenizer = train_wordpiece(SENTENCES, vocab_size=60)
    spec = TaskSpec(task="mlm", vocab_size=tokenizer.get_vocab_size(), num_classes=2, max_len=32, tokenizer=tokenizer)
    model = BertModel(spec, partial(torch.optim.SGD, lr=0.1), n_layer=1, n_head=2, d_model=16, context=32)
    new = {"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams)}
    model.on_save_checkpoint(new)
    old = {**new, KEY: {**new[KEY], "tokenizer": tokenizer}, "hparams_type": DictConfig,
           "hyper_parameters": OmegaConf.create(new["hyper_parameters"]),
           "rng": {**new["rng"], "numpy": np.random.get_state()}}
    torch.save(old, tmp_path / "old.ckpt")
    return model, new, tmp_path / "old.ckpt"


def test_an_old_checkpoint_is_refused_then_converted_and_loads(tmp_path, capsys):
    import numpy as np

    from seqbench.training.convert_checkpoint import main as convert
    from seqbench.models.bert import BertModel
    from seqbench.models.pretrained import KEY, load_pretrained

    model, written, old = _bert_checkpoints(tmp_path)
    with pytest.raises(UnsafeCheckpointError, match=rf"convert_checkpoint {old} <new.ckpt>"):
        load_pretrained(str(old), "bert")

    run_command(convert, [str(old), str(tmp_path / "new.ckpt")])
    report = capsys.readouterr().out
    for line in ("hparams_type: dropped", "hyper_parameters: omegaconf.dictconfig.DictConfig",
                 f"{KEY}.tokenizer: tokenizers.Tokenizer", "rng.numpy[1]: numpy.ndarray"):
        assert f"converted checkpoint.{line}" in report, (line, report)

    converted = torch.load(tmp_path / "new.ckpt", weights_only=True)  # no allowlist
    assert converted[KEY] == written[KEY]  # the tokenizer's JSON text, config and family
    assert converted["hyper_parameters"] == written["hyper_parameters"] and "hparams_type" not in converted
    assert converted["state_dict"].keys() == written["state_dict"].keys()
    assert all(torch.equal(converted["state_dict"][k], v) for k, v in written["state_dict"].items())
    # the converted file is a working checkpoint: fine-tuning restores the backbone, a resume the RNG
    tuned = BertModel(_word_spec(), torch.optim.SGD, pretrained=str(tmp_path / "new.ckpt"))
    for name, value in model.backbone.state_dict().items():
        assert torch.equal(tuned.backbone.state_dict()[name], value), name
    before, held = np.random.get_state(), torch.load(old, weights_only=False)["rng"]["numpy"]  # our own file
    np.random.seed(0)
    tuned.on_load_checkpoint(converted)
    assert np.array_equal(np.random.get_state()[1], held[1]) and np.random.get_state()[2] == held[2]
    np.random.set_state(before)


def _word_spec():
    from seqbench.data.sentences import WordTokenizer
    from seqbench.data.spec import TaskSpec
    from seqbench.data.vocab import Vocab

    words = sorted({w for s in SENTENCES for w in s.split()})
    return TaskSpec(task="classification", vocab_size=len(words) + 2, num_classes=2, pad_id=0, max_len=10,
                    tokenizer=WordTokenizer(Vocab(["<pad>", "<unk>"] + words)))


def test_the_converter_keeps_the_source_and_names_what_it_cannot_convert(tmp_path):
    from seqbench.training.convert_checkpoint import convert
    from seqbench.errors import UserError

    source = tmp_path / "a.ckpt"
    torch.save({"state_dict": {}, "callbacks": {"custom": Payload.__init__}}, source)  # a function: no plain form
    with pytest.raises(UserError, match=r"checkpoint\.callbacks\.custom holds a builtins.function"):
        convert(source, tmp_path / "b.ckpt")
    assert not (tmp_path / "b.ckpt").exists()
    with pytest.raises(UserError, match="must go to a new file"):
        convert(source, source)
