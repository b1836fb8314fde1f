"""A layer from outside the package (issue 65): `model=mixer model.mixer=<module>:<Class>` (seqbench.nn.mixer).

The mixers below are defined here, in a test module, as a user's would be in theirs, and named by import path
(`test_mixer:Leaky`: pytest puts tests/ on the path). They train a step on every task the built-in families'
backbone serves, carry their state across truncated-BPTT windows, are counted by FlopCounterMode when they
have no formula (and that count is a training step's), are sized by the solver the presets use, and fail
before any data is read when their import path does not resolve or when a language model's stream would
need a state they cannot carry.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from conftest import FIXTURES, compose_cfg, run_cli
from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError
from seqbench.models.mixer import MixerModel
from seqbench.nn.flop_count import counted_flops
from seqbench.nn.flops import parallel_recurrent_train_flops
from seqbench.training.run import build, make_trainer
from seqbench.tasks.lm import token_nll


class Leaky(nn.Module):
    """A stateful mixer: h_t = a * h_{t-1} + (1 - a) * (W x_t), read one step at a time."""

    def __init__(self, d_model: int, init: float = 0.0):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)
        self.logit = nn.Parameter(torch.full((d_model,), init))

    def forward(self, x, state=None):
        a, u = torch.sigmoid(self.logit), self.proj(x)  # (d,), (B, T, d)
        h = torch.zeros_like(u[:, 0]) if state is None else state
        ys = []
        for t in range(x.size(1)):
            h = a * h + (1 - a) * u[:, t]
            ys.append(h)
        return torch.stack(ys, 1), h


class Window(nn.Module):
    """A stateless mixer that says so: a causal average over the window it is given."""

    stateless = True

    def __init__(self, d_model: int):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        steps = torch.arange(1, x.size(1) + 1, device=x.device, dtype=x.dtype)[None, :, None]  # (1, T, 1)
        return self.proj(x.cumsum(1) / steps)


class Forgetful(Window):
    """The same layer, without saying it is stateless: refused on a language model's stream."""

    stateless = False


class Formula(Leaky):
    """A stateful mixer with its own FLOPs formula (deliberately a round number, to see it used)."""

    def train_flops_per_token(self, length: int) -> float:
        return 1000.0


TINY = ["logger=csv", "trainer=cpu", "trainer.max_steps=1", "trainer.limit_val_batches=1", "trainer.num_sanity_val_steps=0",
        "trainer.enable_progress_bar=false", "~callbacks.progress_bar", "~callbacks.model_summary",
        "~callbacks.step_checkpoint", "test=false", "model=mixer", "model.d_model=8"]
PROBE = ["data.T=6", "data.batch_size=8", "data.train_size=16", "data.eval_batch_size=16", "data.val_size=16",
         "data.test_size=16"]
TEXT = ["data=text", f"data.train_file={FIXTURES / 'text' / 'train.txt'}", f"data.valid_file={FIXTURES / 'text' / 'valid.txt'}",
        "data.batch_size=4", "data.eval_batch_size=2", "data.bptt=8"]
TASKS = {"lm": TEXT, "classification": ["data=recall", *PROBE], "tagging": ["data=copy", *PROBE],
         "regression": ["data=adding", *PROBE],
         "image": ["data=mnist", "data.as_sequence=rows", "data.train_size=64", "data.batch_size=16", "data.eval_batch_size=100"]}


def train_one_step(overrides: list[str], tmp_path):
    cfg = compose_cfg([*TINY, *overrides], tmp_path)
    datamodule, model = build(cfg)
    trainer = make_trainer(cfg)
    trainer.fit(model, datamodule=datamodule)
    return cfg, model, trainer


@pytest.mark.parametrize("task", TASKS)
def test_a_mixer_from_a_test_module_trains_a_step_on_every_task(task, tmp_path, seed):
    if task == "image":
        from conftest import require_corpus

        require_corpus("mnist")
    cfg, model, trainer = train_one_step(["model.mixer=test_mixer:Leaky", *TASKS[task]], tmp_path)
    assert trainer.global_step == 1 and model.spec.task == task
    assert cfg.recipe.split("/")[1] in ("mingru", "lstm", "mixer")  # the parallel recurrences' recipes, by its base
    assert all(isinstance(m.inner, Leaky) for m in model.layers()) and len(model.layers()) == cfg.model.num_layers


def test_a_stateful_mixer_carries_its_state_across_windows():
    # bug caught: each truncated-BPTT window read from a zero state, as if the stream started again
    torch.manual_seed(0)
    model = MixerModel(TaskSpec("lm", vocab_size=11), torch.optim.SGD, mixer="test_mixer:Leaky", d_model=8,
                       num_layers=2, mixer_options={"init": 2.0})  # a slow leak: the past matters
    tokens = torch.randint(11, (3, 12))
    whole = model.lm_logits({"input": tokens, "window": 0}, "train")
    first = model.lm_logits({"input": tokens[:, :6], "window": 0}, "val")
    second = model.lm_logits({"input": tokens[:, 6:], "window": 1}, "val")
    torch.testing.assert_close(torch.cat([first, second], 1), whole)


def test_a_mixer_without_state_is_refused_on_a_stream_unless_it_says_it_is_stateless(tmp_path):
    # bug caught: a stateless layer read on a stream as if its (absent) state were carried, the loss of the
    # context between windows unseen
    with pytest.raises(ConfigError, match=r"forward\(x\) takes no state.*stateless = True"):
        build(compose_cfg([*TINY, "model.mixer=test_mixer:Forgetful", *TEXT], tmp_path))
    _, model, trainer = train_one_step(["model.mixer=test_mixer:Window", *TEXT], tmp_path)
    assert trainer.global_step == 1
    out = model.generate(torch.zeros(2, 3, dtype=torch.long), 4)  # no step form: the prefix is read again
    assert out.shape == (2, 7)
    train_one_step(["model.mixer=test_mixer:Forgetful", "data=copy", *PROBE], tmp_path)  # no stream: no state needed


def test_an_import_path_that_does_not_resolve_fails_before_training_in_one_sentence(tmp_path):
    # bug caught: the import's traceback from deep inside Hydra's instantiate, after the data were read
    for path, says in [("nowhere.layers:Mixer", "no module 'nowhere'"), ("test_mixer:Missing", "has no 'Missing'"),
                       ("test_mixer:TINY", "not a torch.nn.Module class"), ("Mixer", "not an import path")]:
        with pytest.raises(ConfigError, match=says):
            build(compose_cfg([*TINY, f"model.mixer={path}", "data=copy", *PROBE], tmp_path))
    out = run_cli([*TINY, "model.mixer=nowhere.layers:Mixer", "data=copy", *PROBE], tmp_path)
    assert out.returncode == 1
    lines = [line for line in out.stderr.strip().splitlines() if "nowhere" in line]
    assert len(lines) == 1 and "cannot be imported" in lines[0] and "Traceback" not in out.stderr, out.stderr[-2000:]


def counted_per_token(model, V: int, B: int = 3, T: int = 16) -> float:
    """FlopCounterMode on one real training step of the model, as tests/test_flops.py counts the formulas."""
    x = torch.randint(V, (B, T + 1))
    batch = {"input": x[:, :-1], "target": x[:, 1:], "window": 0}
    model.train()

    def step():
        nll, n = token_nll(model.lm_logits(batch, "train"), batch["target"])
        return nll / n

    return counted_flops(step) / (B * T)


def test_a_mixer_without_a_formula_is_measured_as_a_training_step_counts():
    # bug caught: the measurement counting the forward pass only (a third of a training step's matmuls)
    torch.manual_seed(0)
    V = 50
    leaky = MixerModel(TaskSpec("lm", vocab_size=V), torch.optim.SGD, mixer="test_mixer:Leaky", d_model=24, num_layers=2)
    assert leaky.flops_source == "measured"
    assert leaky.flops_per_token(16) == pytest.approx(counted_per_token(leaky, V), rel=0.01)
    # the built-in minGRU as a mixer: measured, it agrees with its formula (seqbench.nn.flops). minGRU, not
    # the SSM: the counter sees only matmuls, and all of minGRU's formula is matmuls, while the SSM's formula
    # also counts its scan and depthwise conv, which run as element-wise multiply-adds the counter cannot see
    mingru = MixerModel(TaskSpec("lm", vocab_size=V), torch.optim.SGD, mixer="seqbench.nn.min_rnn:MinGRU", d_model=24,
                        num_layers=2, mixer_options={"hidden_size": 24})
    assert mingru.flops_per_token(16) == pytest.approx(parallel_recurrent_train_flops("mingru", 24, 2, V), rel=0.01)
    formula = MixerModel(TaskSpec("lm", vocab_size=V), torch.optim.SGD, mixer="test_mixer:Formula", d_model=24, num_layers=2)
    assert formula.flops_source == "formula" and formula.flops_per_token(16) == 2 * 1000 + 3 * 2 * 24 * V


def test_a_mixer_preset_solves_its_width_when_the_run_starts(tmp_path):
    """A probe preset of the mixer (generated with a `sizing:` target) solves the width when the run starts."""
    out = run_cli(["experiment=long_range", "preset=probe/mixer", "model.mixer=seqbench.nn.ssm:SelectiveSSM",
                   "trainer.max_steps=1", "data.T=6", "data.batch_size=16", "data.train_size=16", "data.val_size=16",
                   "data.eval_batch_size=16", "data.test_size=16",
                   "logger=csv", "trainer=cpu", "trainer.enable_progress_bar=false", "test=false"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    (path,) = tmp_path.rglob("metrics.json")
    metrics = json.loads(path.read_text())
    assert abs(metrics["sizing/deviation"]) <= 0.01, metrics  # the LSTM's 76,042 on copy, within 1 %
    assert metrics["params_non_embedding"] == metrics["sizing/count"]


def test_a_language_model_mixer_says_its_flops_were_measured(tmp_path):
    out = run_cli([*TINY, "model.mixer=seqbench.nn.ssm:SelectiveSSM", *TEXT, "budget.flops=2e6", "budget.evals=1"],
                  tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    (path,) = tmp_path.rglob("metrics.json")
    metrics = json.loads(path.read_text())
    assert metrics["flops_source"] == "measured" and metrics["flops_per_token"] > 0
