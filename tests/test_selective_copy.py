"""Selective copying (Gu & Dao 2023, §4.1.1): the generator read back by brute force, its baselines against
the predictors they describe, the experiment over every compared family plus the time-invariant control,
and that the control's Δ, B, C are the same for any input while the selective SSM's are not."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from conftest import compose_cfg
from seqbench.training.config_check import check_config
from seqbench.data import probes
from seqbench.data.streams import IGNORE_INDEX
from seqbench.data.synthetic import SelectiveCopyDataModule
from seqbench.families import FAMILIES, compared
from seqbench.nn.ssm import SelectiveSSM
from seqbench.training.run import build

CONTROL = "probe/ssm_time_invariant"


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_the_hand_made_example():
    """T = 3 blanks, 2 data tokens of 4 symbols: the 4 positions before the 2 markers (5) hold both
    symbols in order, the answers are those symbols, nothing else is scored."""
    x, tags = probes.selective_copy(1, T=3, num_symbols=4, num_data=2, generator=gen(3)).values()
    data = [(t, s) for t, s in enumerate(x[0, :5].tolist()) if s]
    assert x.shape == (1, 7) and len(data) == 2 and x[0, 5:].tolist() == [5, 5]
    assert tags[0].tolist() == [IGNORE_INDEX] * 5 + [s for _, s in data]


@pytest.mark.parametrize("T, num_symbols, num_data", [(20, 8, 6), (0, 4, 5), (7, 16, 16)])
def test_every_row_read_back_by_brute_force(T, num_symbols, num_data):
    """Each row, read token by token: exactly num_data symbols in 1..K among the first T + num_data
    positions, blanks around them, num_data markers K+1 at the end, and the scored tags are the symbols in
    the order they stand; nothing else is scored."""
    n = 300
    x, tags = probes.selective_copy(n, T, num_symbols, num_data, generator=gen()).values()
    region, L = T + num_data, T + 2 * num_data
    assert x.shape == tags.shape == (n, L)
    for row in range(n):
        tokens, answers = x[row].tolist(), tags[row].tolist()
        symbols = [s for s in tokens[:region] if s != 0]
        assert len(symbols) == num_data and all(1 <= s <= num_symbols for s in symbols)
        assert tokens[region:] == [num_symbols + 1] * num_data
        assert answers[:region] == [IGNORE_INDEX] * region and answers[region:] == symbols


def test_positions_are_uniform_over_the_region_and_differ_between_rows():
    """Every one of the T + num_data positions holds a data token num_data / (T + num_data) of the time,
    the first and the last included (a region of T, or of fixed places as in copy memory, fails), and the
    gaps between tokens change from row to row, which is what makes the task selective."""
    T, k, n = 24, 8, 8000
    x = probes.selective_copy(n, T, 8, k, generator=gen(1))["input"]
    occupied = (x[:, : T + k] != 0).float().mean(0)  # (T + k,)
    assert (occupied - k / (T + k)).abs().max() < 0.03
    assert len({tuple((row != 0).nonzero().flatten().tolist()) for row in x[:200, : T + k]}) == 200


# (16, 4) and (4, 12): the exact plateau with K and num_data swapped differs by 0.03-0.05 in accuracy
@pytest.mark.parametrize("num_symbols, num_data", [(16, 16), (16, 4), (4, 12)])
def test_baselines_are_what_the_predictors_score(num_symbols, num_data):
    """On 40,000 generated examples: a uniform guess over the symbols has cross-entropy log K; always
    naming the symbol most frequent in training is right 1/K of the time; predicting each symbol with its
    count among the row's data tokens (order ignored) scores the frequency plateau."""
    K, k, n = num_symbols, num_data, 40_000
    base = probes.selective_copy_baseline(K, k)
    x, tags = probes.selective_copy(n, 5, K, k, generator=gen(2)).values()
    answers = tags[:, -k:]  # (n, k)
    uniform = torch.full((n * k, K + 2), -1e9)
    uniform[:, 1 : K + 1] = 0.0
    assert F.cross_entropy(uniform, answers.flatten()).item() == pytest.approx(base["loss"], rel=1e-6)
    most_frequent = torch.bincount(probes.selective_copy(n, 5, K, k, generator=gen(3))["tags"][:, -k:].flatten()).argmax()
    assert (answers == most_frequent).float().mean().item() == pytest.approx(base["acc"], abs=0.005)
    counts = F.one_hot(x[:, : 5 + k], K + 2)[..., 1 : K + 1].sum(1).float()  # (n, K): the row's bag of symbols
    freq = counts / k
    label_p = freq.gather(1, answers - 1)  # (n, k); every answer occurs in its row: p > 0
    assert -label_p.log().mean().item() == pytest.approx(base["frequency_loss"], abs=0.005)
    guess = (freq + torch.rand(freq.shape, generator=gen(4)) * 1e-3).argmax(1, keepdim=True) + 1  # any modal symbol
    assert (answers == guess).float().mean().item() == pytest.approx(base["frequency_acc"], abs=0.01)
    assert 1 / K < base["frequency_acc"] < 1 and base["frequency_loss"] < math.log(K)


def test_the_datamodule_declares_the_task_and_logs_the_baselines():
    dm = SelectiveCopyDataModule(T=10, num_symbols=6, num_data=4, batch_size=8, eval_batch_size=10,
                                 train_size=16, val_size=20, test_size=20, seed=3)
    spec = dm.spec
    assert spec.task == "tagging" and spec.vocab_size == spec.num_classes == 8 and spec.max_len == 18
    assert spec.extras["baseline"] == probes.selective_copy_baseline(6, 4) and spec.extras["T"] == 10
    assert spec.extras["solved"] == {"monitor": "val/acc", "threshold": 0.99, "mode": "max"}
    dm.setup()
    batch = next(iter(dm.val_dataloader()))
    assert batch["input"].shape == (10, 18) and (batch["tags"] != IGNORE_INDEX).sum(1).eq(4).all()


def _sweep(tmp_path) -> list[str]:
    return str(compose_cfg(["experiment=long_range_selective"], tmp_path).hydra.sweeper.params["preset"]).split(",")


def test_the_sweep_is_every_compared_family_and_the_control_after_ssm(tmp_path):
    families = [f"probe/{f}" for f in compared()]
    sweep = _sweep(tmp_path)
    assert [p for p in sweep if p != CONTROL] == families
    assert sweep.index(CONTROL) == sweep.index("probe/ssm") + 1
    assert "ssm_time_invariant" not in FAMILIES  # a variant preset, not a row of the registry


def _budget(cfg) -> dict:
    """What every job of a comparison must share: data, steps, batch, schedule, clipping, stopping."""
    return {"data": cfg.data, "max_steps": cfg.trainer.max_steps, "clip": cfg.trainer.gradient_clip_val,
            "scheduler": {k: v for k, v in cfg.model.scheduler.items() if k != "_target_"},
            "scheduler_target": cfg.model.scheduler._target_, "stop": cfg.callbacks.stop_when_solved,
            "val_every": (cfg.trainer.val_check_interval, cfg.trainer.check_val_every_n_epoch)}


def test_every_job_composes_with_one_budget_and_the_probes_learning_rates(tmp_path):
    """Each preset of the sweep composes under the experiment, passes the run's checks and builds on the
    selective-copying spec; all share the budget; each keeps the learning rate it has on the other
    probes (experiment=long_range_copy), the control the selective SSM's."""
    budgets = {}
    for preset in _sweep(tmp_path):
        cfg = compose_cfg(["experiment=long_range_selective", f"preset={preset}", "data.val_size=250",
                           "data.test_size=250"], tmp_path)
        check_config(cfg, {k: v for k, v in cfg.hydra.runtime.choices.items() if isinstance(v, str)})
        datamodule, model = build(cfg)
        assert isinstance(datamodule, SelectiveCopyDataModule) and model.spec.task == "tagging"
        budgets[preset] = _budget(cfg)
        copy = compose_cfg(["experiment=long_range_copy", f"preset={preset}"], tmp_path)
        assert cfg.model.optimizer == copy.model.optimizer, preset
    for preset, budget in budgets.items():
        assert budget == budgets["probe/ssm"], f"{preset} trains on another budget than probe/ssm"
    assert compose_cfg(["experiment=long_range_selective", f"preset={CONTROL}"], tmp_path).model.optimizer == \
        compose_cfg(["experiment=long_range_selective", "preset=probe/ssm"], tmp_path).model.optimizer


def _selection_of(model, batch) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Each SSM layer's (Δ, B, C) at every step of `batch`, read from the coefficients the layer
    computes: a = exp(Δ A) gives Δ (A < 0 fixed), b = Δ B u gives B, C is returned as it is."""
    seen = []
    original = SelectiveSSM._coefficients

    def spy(layer, u):
        a, b, C = original(layer, u)
        A = -torch.exp(layer.A_log)
        delta = (a.log() / A).mean(-1)  # (B, T, E): the same Δ for every n
        B = b / (delta * u).unsqueeze(-1)  # (B, T, E, N)
        seen.append((delta, B, C.expand_as(B)))
        return a, b, C

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SelectiveSSM, "_coefficients", spy)
        with torch.no_grad():
            model.tag(batch)
    return seen


@pytest.mark.parametrize("preset, invariant", [(CONTROL, True), ("probe/ssm", False)])
def test_the_control_is_time_invariant_and_the_selective_ssm_is_not(preset, invariant, tmp_path):
    """The experiment's models, as the sweep builds them, on a selective-copying batch and on the same
    batch with one data token changed: the control's Δ, B and C are equal at every step of every layer,
    the selective SSM's change (at and after the token). `scan=doubling` sends both through
    `_coefficients`, where Δ, B, C are formed; on the CPU the selective one otherwise fuses them into its
    scan (the same projections)."""
    cfg = compose_cfg(["experiment=long_range_selective", f"preset={preset}", "data.T=12", "model.scan=doubling",
                       "data.val_size=250", "data.test_size=250"], tmp_path)
    datamodule, model = build(cfg)
    model = model.double().eval()
    assert model.hparams.selective is not invariant
    batch = datamodule.make(4, gen(5))
    perturbed = {**batch, "input": batch["input"].clone()}
    where = (batch["input"][0] != 0).nonzero()[0].item()  # row 0's first data token
    perturbed["input"][0, where] = batch["input"][0, where] % datamodule.num_symbols + 1  # another symbol
    before, after = _selection_of(model, batch), _selection_of(model, perturbed)
    assert len(before) == len(after) == cfg.model.num_layers
    for layer, (one, other) in enumerate(zip(before, after)):
        for name, a, b in zip("ΔBC", one, other):
            if invariant:
                torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12, msg=f"layer {layer}'s {name} read the input")
            else:
                changed = (a[0] - b[0]).abs().flatten(1).amax(1) > 1e-9  # (T,): steps where row 0's value moved
                assert changed[where] and not changed[:where].any(), (layer, name, changed)
