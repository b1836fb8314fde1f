"""The synthetic long-range probes: shapes, seeds, baselines, and that a small model can learn copy."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
import torch.nn.functional as F

from conftest import TINY
from seqbench.data import probes
from seqbench.data.streams import IGNORE_INDEX
from seqbench.data.synthetic import AddingDataModule, CopyDataModule, RecallDataModule
from seqbench.families import FAMILIES, compared
from seqbench.models.recurrent import RecurrentModel


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_copy_memory_layout():
    batch = probes.copy_memory(5, T=7, num_symbols=4, copy_length=3, generator=gen())
    x, tags = batch["input"], batch["tags"]
    assert x.shape == tags.shape == (5, 3 + 7 + 3)
    assert ((x[:, :3] >= 1) & (x[:, :3] <= 4)).all()
    assert (x[:, 3 + 7 - 1] == 5).all()  # delimiter T - 1 blanks after the last symbol
    x_rest = torch.cat([x[:, 3:9], x[:, 10:]], 1)
    assert (x_rest == 0).all()  # everything else is blank
    assert (tags[:, :-3] == IGNORE_INDEX).all() and torch.equal(tags[:, -3:], x[:, :3])


def test_adding_layout_and_target():
    batch = probes.adding(64, T=20, generator=gen())
    x, y = batch["input"], batch["target"]
    assert x.shape == (64, 20, 2) and y.shape == (64,)
    marks = x[..., 1]
    assert (marks.sum(1) == 2).all()
    assert (marks[:, :10].sum(1) == 1).all() and (marks[:, 10:].sum(1) == 1).all()  # one mark per half
    torch.testing.assert_close((x[..., 0] * marks).sum(1), y)


def test_recall_layout_and_label():
    batch = probes.recall(32, T=3, num_pairs=4, num_keys=6, num_values=5, generator=gen())
    x, label = batch["input"], batch["label"]
    assert x.shape == (32, 2 * 4 + 3 + 2) and label.shape == (32,)
    keys, values = x[:, 0:8:2], x[:, 1:8:2] - 7
    assert all(len(set(row.tolist())) == 4 for row in keys)  # distinct keys
    assert (x[:, 8:11] == 0).all() and (x[:, -2] == 6 + 5 + 1).all()
    for row in range(32):  # the label is the value stored under the queried key
        slot = (keys[row] == x[row, -1]).nonzero().item()
        assert values[row, slot] == label[row]


@pytest.mark.parametrize("make", [
    lambda g: probes.copy_memory(8, 20, generator=g),
    lambda g: probes.adding(8, 20, generator=g),
    lambda g: probes.recall(8, 20, generator=g),
])
def test_generators_are_determined_by_the_seed(make):
    a, b, c = make(gen(1)), make(gen(1)), make(gen(2))
    for key in a:
        assert torch.equal(a[key], b[key])
    assert any(not torch.equal(a[key], c[key]) for key in a)


def test_copy_baseline_is_the_uniform_predictors_loss_and_accuracy():
    K = 8
    batch = probes.copy_memory(500, 10, num_symbols=K, generator=gen())
    logits = torch.full((*batch["tags"].shape, K + 2), -1e9)
    logits[..., 1 : K + 1] = 0.0  # uniform over the K symbols
    loss = F.cross_entropy(logits.flatten(0, 1), batch["tags"].flatten(), ignore_index=IGNORE_INDEX)
    base = probes.copy_memory_baseline(K)
    assert loss.item() == pytest.approx(base["loss"], rel=1e-6) and base["loss"] == pytest.approx(math.log(8))
    assert base["acc"] == 1 / 8
    # a fixed guess is right 1/K of the time on the scored positions
    scored = batch["tags"] != IGNORE_INDEX
    assert (batch["tags"][scored] == 3).float().mean().item() == pytest.approx(1 / K, abs=0.01)


def test_adding_baseline_is_the_variance_of_the_sum():
    target = probes.adding(200_000, 10, generator=gen())["target"]
    assert probes.adding_baseline()["loss"] == pytest.approx(1 / 6)
    assert F.mse_loss(torch.ones_like(target), target).item() == pytest.approx(1 / 6, rel=0.01)


def test_recall_baseline():
    base = probes.recall_baseline(8)
    assert base == {"loss": pytest.approx(math.log(8)), "acc": 1 / 8}
    label = probes.recall(20_000, 5, num_values=8, generator=gen())["label"]
    assert torch.bincount(label, minlength=8).float().div(20_000).sub(1 / 8).abs().max() < 0.01


@pytest.mark.parametrize("num_pairs, num_values", [(8, 8), (4, 8), (3, 5), (16, 16)])
def test_recall_frequency_plateau_is_what_counting_the_values_scores(num_pairs, num_values):
    """The exact plateau numbers equal those of the predictor itself (each value with its frequency
    among the pairs, the query ignored), run on 40,000 sampled examples."""
    exact = probes.recall_frequency_baseline(num_pairs, num_values)
    batch = probes.recall(40_000, 2, num_pairs=num_pairs, num_keys=2 * num_pairs, num_values=num_values,
                          generator=gen())
    values = batch["input"][:, 1 : 2 * num_pairs : 2] - (2 * num_pairs + 1)  # (n, P) value ids
    freq = torch.nn.functional.one_hot(values, num_values).float().mean(1)  # (n, V): the predicted distribution
    label_p = freq.gather(1, batch["label"][:, None]).squeeze(1)
    loss = -label_p.log().mean().item()  # the label's value always occurs among the pairs: p > 0
    tie_break = torch.rand(freq.shape, generator=gen()) * 1e-3  # any modal value is as good as another
    acc = ((freq + tie_break).argmax(1) == batch["label"]).float().mean().item()
    assert exact["frequency_loss"] == pytest.approx(loss, abs=0.01)
    assert exact["frequency_acc"] == pytest.approx(acc, abs=0.01)
    assert exact["frequency_acc"] > 1 / num_values and exact["frequency_loss"] < math.log(num_values)
    if (num_pairs, num_values) == (8, 8):  # the numbers experiments/long-range.md quotes
        assert (round(exact["frequency_acc"], 3), round(exact["frequency_loss"], 3)) == (0.325, 1.557)


def test_datamodules_declare_their_task_and_fixed_eval_sets():
    copy = CopyDataModule(T=30, num_symbols=6, copy_length=4, batch_size=8, eval_batch_size=10, train_size=16,
                          val_size=20, test_size=20, seed=3)
    spec = copy.spec
    assert spec.task == "tagging" and spec.vocab_size == spec.num_classes == 8 and spec.max_len == 38
    assert spec.extras["baseline"] == probes.copy_memory_baseline(6)
    copy.setup()
    val = list(copy.val_dataloader())
    assert len(val) == 2 and val[0]["input"].shape == (10, 38)
    again = CopyDataModule(T=30, num_symbols=6, copy_length=4, batch_size=8, eval_batch_size=10, train_size=16,
                           val_size=20, test_size=20, seed=3)
    again.setup()
    assert torch.equal(next(iter(again.val_dataloader()))["input"], val[0]["input"])
    assert not torch.equal(copy.fixed["val"]["input"], copy.fixed["test"]["input"])
    assert AddingDataModule(T=12).spec.input_dim == 2
    recall = RecallDataModule(T=5, num_pairs=3, num_keys=4, num_values=6).spec
    assert recall.task == "classification" and recall.num_classes == 6 and recall.vocab_size == 12


def test_training_batches_are_fresh_each_epoch_and_sharded_by_rank():
    dm = CopyDataModule(T=10, batch_size=8, train_size=16, seed=0)
    epochs = iter([0, 0, 1])
    from seqbench.data.synthetic import FreshBatches

    whole = FreshBatches(dm.make, 8, 2, seed=0, epoch=lambda: next(epochs))
    e0, e0_again, e1 = list(whole), list(whole), list(whole)
    assert len(e0) == 2 and e0[0]["input"].shape == (8, 30)
    assert torch.equal(e0[1]["input"], e0_again[1]["input"])
    assert not torch.equal(e0[0]["input"], e1[0]["input"])
    halves = [list(FreshBatches(dm.make, 8, 2, seed=0, rank=r, world_size=2, epoch=lambda: 0)) for r in (0, 1)]
    torch.testing.assert_close(torch.cat([halves[0][1]["input"], halves[1][1]["input"]]), e0[1]["input"])


def test_sizes_must_be_multiples_of_the_batch():
    with pytest.raises(ValueError, match="multiple of the batch size"):
        CopyDataModule(batch_size=32, train_size=100)


def test_a_small_gru_learns_copy_at_a_short_gap(seed, record_property):
    """Well past the baseline (1/4) within 300 steps; ~10 s on one CPU thread."""
    dm = CopyDataModule(T=5, num_symbols=4, copy_length=3, batch_size=32, eval_batch_size=500, train_size=32,
                        val_size=500, test_size=500, seed=0)
    dm.setup()
    model = RecurrentModel(dm.spec, partial(torch.optim.Adam, lr=1e-2), cell="gru", embedding_size=8,
                           hidden_size=64, num_layers=1, dropout=0.0, init_range=None)
    opt = model.optimizer_factory(params=model.parameters())
    for step in range(300):
        batch = dm.make(32, gen(1000 + step))
        loss, _ = model.task.loss_and_predictions(model, batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        val = dm.fixed["val"]
        loss, pred = model.task.loss_and_predictions(model, val)
    scored = val["tags"] != IGNORE_INDEX
    acc = (pred[scored] == val["tags"][scored]).float().mean().item()
    record_property("learned", acc)
    assert acc > 0.9, f"GRU copy accuracy {acc:.3f} after 300 steps (baseline 0.25)"
    assert loss.item() < 0.5 * probes.copy_memory_baseline(4)["loss"]


def _recomputed(cfg, checkpoint: str) -> float:
    """The logged test metric, computed here from the tested checkpoint and the test set without the
    task's torchmetrics: accuracy over the scored positions (copy) or labels (recall), or the mean
    squared error (adding). Three training steps leave a model near chance, so a bound on the metric
    would not catch a broken one; this does."""
    from seqbench.training.run import build

    datamodule, model = build(cfg)
    model.load_state_dict(torch.load(checkpoint, weights_only=True)["state_dict"])
    model.eval()
    test = datamodule.fixed["test"]
    with torch.no_grad():
        if "tags" in test:
            scored = test["tags"] != IGNORE_INDEX
            return (model.tag(test).argmax(-1)[scored] == test["tags"][scored]).float().mean().item()
        if "label" in test:
            return (model.classify(test).argmax(-1) == test["label"]).float().mean().item()
        return (model.regress(test) - test["target"]).pow(2).mean().item()


@pytest.mark.parametrize("family", compared())
def test_long_range_experiment_trains_and_logs_the_baseline(family, cfg_factory, tmp_path):
    """One tiny job of the sweep through `seqbench.training.run.train`: the baseline lands in metrics.json."""
    from seqbench.training.run import train

    cfg = cfg_factory([*TINY, "experiment=long_range", f"preset=probe/{family}", "data.T=6", "data.train_size=64",
                       "data.val_size=250", "data.test_size=250", "trainer.max_steps=3", *FAMILIES[family].tiny], tiny=False)
    metrics = train(cfg, tmp_path)
    assert metrics["status"] == "completed"
    assert metrics["val/baseline_acc"] == pytest.approx(1 / 8)
    assert metrics["val/baseline_loss"] == pytest.approx(math.log(8))
    assert metrics["test/acc"] == pytest.approx(_recomputed(cfg, metrics["tested_checkpoint"]), abs=1e-6)


@pytest.mark.parametrize("data, family, metric", [("adding", "gru", "test/mse"), ("recall", "transformer", "test/acc")])
def test_the_other_probes_train_through_their_task_contracts(data, family, metric, cfg_factory, tmp_path):
    from seqbench.training.run import train

    sizes = ["model.hidden_size=16"] if family == "gru" else ["model.n_layer=1", "model.d_model=16"]
    cfg = cfg_factory([*TINY, "experiment=long_range", f"data={data}", f"preset=probe/{family}", "data.T=8",
                       "data.train_size=64", "data.val_size=250", "data.test_size=250", "trainer.max_steps=3",
                       *sizes], tiny=False)
    metrics = train(cfg, tmp_path)
    assert metrics["status"] == "completed"
    assert metrics[metric] == pytest.approx(_recomputed(cfg, metrics["tested_checkpoint"]), rel=1e-5)
    expected = probes.adding_baseline() if data == "adding" else probes.recall_baseline(8)
    assert metrics["val/baseline_loss"] == pytest.approx(expected["loss"])
    if data == "recall":  # the plateau of counting the values is logged beside the trivial line
        assert metrics["val/baseline_frequency_acc"] == pytest.approx(probes.recall_frequency_baseline(8, 8)["frequency_acc"])


def test_scrambled_symbols_control_separates_memory_from_chance():
    from seqbench.analysis.copy_positions import answer_accuracy

    class Oracle(torch.nn.Module):
        """Copies the symbols it reads: perfect on real inputs, chance when they are scrambled."""

        def tag(self, batch):
            x = batch["input"]
            emissions = torch.zeros(*x.shape, 10)
            emissions[:, -3:] = F.one_hot(x[:, :3], 10).float()
            return emissions

    batch = probes.copy_memory(2000, 5, num_symbols=8, copy_length=3, generator=gen())
    acc = answer_accuracy(Oracle(), batch, num_symbols=8, copy_length=3)
    assert acc["real"].shape == (3,) and (acc["real"] == 1).all()
    assert (acc["scrambled"] - 1 / 8).abs().max() < 0.03


@pytest.mark.parametrize("threshold, solved, steps", [(10.0, True, 2), (None, False, None)])
def test_until_solved_experiment_records_steps_to_solve_in_metrics_json(threshold, solved, steps, cfg_factory,
                                                                        tmp_path):
    """experiment=long_range_adding end to end (validation every 2 steps): a criterion met at the first
    validation stops the run there and is recorded; the data's own (mse <= 0.01) is not met in 4 steps of
    a 16-unit GRU, so that run goes to the cap."""
    from seqbench.training.run import train

    by_hand = [f"callbacks.stop_when_solved.threshold={threshold}"] if threshold else []
    cfg = cfg_factory([*TINY, "experiment=long_range_adding", "preset=probe/gru", "model.hidden_size=16",
                       "data.T=8", "data.train_size=64", "data.val_size=250", "data.test_size=250",
                       "trainer.max_steps=4", "trainer.limit_train_batches=1.0", "trainer.max_epochs=-1",
                       *by_hand], tiny=False)
    metrics = train(cfg, tmp_path)
    assert metrics["status"] == "completed"
    assert metrics["solved"] is solved and metrics["steps_to_solve"] == steps
    assert metrics["solve_criterion"] == f"val/mse <= {threshold or 0.01:g}"
    last = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == (2 if solved else 4)  # stopped there, or trained to the cap
