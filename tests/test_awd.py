"""AWD-LSTM's regularisers (seqbench.nn.awd), variable-length BPTT and NT-ASGD (seqbench.callbacks.nt_asgd)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import Callback
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from seqbench.callbacks.nt_asgd import NTASGD, nonmonotone_trigger
from seqbench.data.streams import IGNORE_INDEX, StreamWindows
from seqbench.nn.awd import LockedDropout, activation_penalty, drop_recurrent_weights, word_dropout
from seqbench.nn.recurrent_lm import RecurrentLM
from seqbench.training.run import build, make_trainer, train


def test_a_locked_mask_is_the_same_at_every_step_and_differs_between_sequences():
    torch.manual_seed(0)
    drop = LockedDropout(0.5).train()
    y = drop(torch.ones(8, 20, 16))  # (B, T, C)
    assert torch.equal(y, y[:, :1].expand_as(y))  # one mask per sequence, reused at every step
    assert set(y.unique().tolist()) == {0.0, 2.0}  # dropped or rescaled by 1/(1-p)
    assert not torch.equal(y[0, 0], y[1, 0])  # another sequence, another mask
    assert torch.equal(drop.eval()(y), y)


def test_weight_drop_changes_the_recurrent_weights_in_training_only_and_keeps_the_parameters():
    torch.manual_seed(0)
    plain = nn.LSTM(4, 6, batch_first=True)
    dropped = drop_recurrent_weights(nn.LSTM(4, 6, batch_first=True), 0.5)
    raw = dropped.parametrizations.weight_hh_l0.original
    with torch.no_grad():
        raw.copy_(plain.weight_hh_l0)
        for name in ("weight_ih_l0", "bias_ih_l0", "bias_hh_l0"):
            getattr(dropped, name).copy_(getattr(plain, name))
    before = raw.detach().clone()
    x = torch.randn(3, 5, 4)
    out_train, _ = dropped.train()(x)
    seen = dropped.weight_hh_l0  # what the kernel reads in training: some entries zeroed, the rest x2
    assert (seen == 0).any() and torch.allclose(seen[seen != 0], 2 * before[seen != 0])
    assert not torch.allclose(out_train, plain(x)[0])
    out_train.sum().backward()
    assert raw.grad is not None and (raw.grad == 0).any()  # the gradient reaches the raw matrix, masked
    torch.testing.assert_close(raw.detach(), before, rtol=0, atol=0)  # the stored parameter is untouched
    assert torch.equal(dropped.state_dict()["parametrizations.weight_hh_l0.original"], before)
    dropped.eval()
    assert dropped.weight_hh_l0 is raw  # eval reads the raw matrix itself
    torch.testing.assert_close(dropped(x)[0], plain(x)[0])


def test_embedding_dropout_zeroes_whole_words_and_rescales_the_rest():
    torch.manual_seed(0)
    emb = nn.Embedding(50, 8)
    tokens = torch.randint(0, 50, (4, 30))
    out = word_dropout(emb, tokens, 0.5, training=True)  # (B, T, E)
    full = emb(tokens)
    zero = (out == 0).all(-1)  # (B, T): positions whose word was dropped
    assert zero.any() and (~zero).any()
    for w in tokens.unique():  # a word is dropped everywhere it occurs or nowhere
        at = tokens == w
        assert zero[at].all() or (~zero[at]).all()
    torch.testing.assert_close(out[~zero], 2 * full[~zero])
    assert torch.equal(word_dropout(emb, tokens, 0.5, training=False), full)


def test_ar_and_tar_are_the_formula_on_a_hand_made_tensor():
    """AR = alpha · mean(dropped²) and TAR = beta · mean((raw_t - raw_{t-1})²) (Merity et al. 2018, §4.6)."""
    dropped = torch.tensor([[[1.0, 2.0], [3.0, 4.0]]])  # (B=1, T=2, H=2): mean of squares 30 / 4 = 7.5
    raw = torch.tensor([[[1.0, 1.0], [2.0, 3.0]]])  # steps differ by (1, 2): mean of squares 5 / 2 = 2.5
    assert activation_penalty(dropped, raw, 2.0, 0.0).item() == pytest.approx(15.0)
    assert activation_penalty(dropped, raw, 0.0, 3.0).item() == pytest.approx(7.5)
    assert activation_penalty(dropped, raw, 2.0, 3.0).item() == pytest.approx(22.5)
    assert activation_penalty(dropped, raw[:, :1], 0.0, 3.0).item() == 0.0  # one step: no temporal difference


def test_the_awd_stack_ties_a_narrower_last_layer_and_trains_with_its_penalty():
    """The penalty is AR on the last layer's dropped-out output and TAR on its raw output, the two
    tensors caught on their way through the output dropout."""
    torch.manual_seed(0)
    lm = RecurrentLM(30, "lstm", 8, 20, 3, 0.3, tie_weights=True, lock_dropout=True, word_dropout=0.1,
                     weight_drop=0.5, ar=2.0, tar=1.0).train()
    assert lm.decoder.weight is lm.embedding.weight and lm.sizes == [20, 20, 8]
    seen = {}
    lm.output_dropout.register_forward_hook(lambda module, args, out: seen.update(raw=args[0], dropped=out))
    tokens = torch.randint(0, 30, (2, 6))
    logits, state = lm(tokens)
    assert logits.shape == (2, 6, 30) and [s[0].shape[-1] for s in state] == [20, 20, 8]
    raw, dropped = seen["raw"], seen["dropped"]  # (B, T, 8)
    assert not torch.equal(raw, dropped)
    expected = 2.0 * dropped.pow(2).mean() + 1.0 * (raw[:, 1:] - raw[:, :-1]).pow(2).mean()
    assert lm.penalty.item() == pytest.approx(expected.item(), rel=1e-6)
    lm.eval()
    a, _ = lm(tokens)
    assert lm.penalty is None and torch.equal(a, lm(tokens)[0])  # no mask of any kind in eval


def test_variable_bptt_tiles_every_column_once_with_lengths_that_vary_by_epoch():
    stream = torch.arange(2001)
    epoch = [0]
    ds = StreamWindows(stream, 4, 20, variable=True, seed=3, epoch=lambda: epoch[0])
    batches = list(ds)
    assert len(batches) == len(ds)
    targets = torch.cat([b["target"] for b in batches], dim=1)
    real = targets[targets != IGNORE_INDEX]
    assert torch.equal(real.sort().values, stream[1:])  # every target once, in column order
    lengths = [b["input"].size(1) for b in batches]
    assert len(set(lengths)) > 3 and min(lengths[:-1]) >= 5
    assert all(b["lr_scale"] == pytest.approx(b["input"].size(1) / 20) for b in batches[:-1])
    again = [b["input"].size(1) for b in StreamWindows(stream, 4, 20, variable=True, seed=3, epoch=lambda: 0)]
    assert again == lengths  # a resumed run finds the same windows
    epoch[0] = 1
    assert [b["input"].size(1) for b in ds] != lengths


def test_the_nonmonotone_trigger_fires_exactly_on_its_criterion():
    # worse than the best of all but the last n=2 checks, and only with more than n earlier checks
    assert not nonmonotone_trigger([5.0, 4.0], 6.0, 2)
    assert not nonmonotone_trigger([5.0, 4.0, 3.0], 4.5, 2)  # best before the last 2 is 5.0
    assert nonmonotone_trigger([5.0, 4.0, 3.0], 5.1, 2)
    assert not nonmonotone_trigger([5.0, 4.0, 3.0], 5.0, 2)  # equal is not worse
    cb = NTASGD(nonmono=2)
    losses = [5.0, 4.0, 3.0, 3.5, 3.2, 3.1, 2.9]
    switched = []
    for step, loss in enumerate(losses):
        trainer = SimpleNamespace(sanity_checking=False, callback_metrics={"val/loss": torch.tensor(loss)},
                                  global_step=step)
        cb.on_validation_end(trainer, None)
        switched.append(cb.averaging)
    # 3.5 is worse than the best (3.0) but within the last 2 checks: tolerated; 3.1 is worse than
    # min(5, 4, 3) with 3.5 and 3.2 after it: the switch, at that check and never before
    assert switched == [False, False, False, False, False, True, True] and cb.switched_at == 5
    restored = NTASGD(nonmono=2)
    restored.load_state_dict(cb.state_dict())
    assert restored.averaging and restored.history == pytest.approx(losses)


def test_a_budgeted_run_switches_at_the_latest_fraction_when_the_criterion_never_fires(monkeypatch):
    from lightning.pytorch.callbacks import Timer

    def checks(cb, trainer_kw, steps):
        switched = []
        for step, loss in zip(steps, range(20, 0, -1)):  # validation always improves: no trigger
            trainer = SimpleNamespace(sanity_checking=False, callback_metrics={"val/loss": torch.tensor(float(loss))},
                                      global_step=step, **trainer_kw)
            cb.on_validation_end(trainer, None)
            switched.append(cb.averaging)
        return switched

    assert not any(checks(NTASGD(nonmono=2), {"callbacks": [], "max_steps": 10}, range(0, 20, 2)))
    by_steps = NTASGD(nonmono=2, latest=0.5)
    assert checks(by_steps, {"callbacks": [], "max_steps": 10}, range(0, 10)) == [False] * 5 + [True] * 5
    assert by_steps.switched_at == 5
    timer = Timer(duration="00:00:10:00")  # 600 s; the elapsed time is what a resumed Timer restores
    elapsed = iter([100.0, 300.0, 359.0, 361.0, 500.0])
    monkeypatch.setattr(timer, "time_elapsed", lambda stage="train": next(elapsed))
    by_time = NTASGD(nonmono=2, latest=0.6)
    assert checks(by_time, {"callbacks": [timer], "max_steps": -1}, range(5)) == [False, False, False, True, True]
    with pytest.raises(ValueError, match="fraction"):
        NTASGD(latest=1.5)


class _Regression(L.LightningModule):
    """A linear regression under plain SGD: every step moves the weights, so an average is checkable.
    Each validation records the weights it read."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(3, 1)
        self.validated: dict[int, torch.Tensor] = {}  # global step -> the weight the validation read

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.mse_loss(self.layer(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.validated[self.trainer.global_step] = self.layer.weight.detach().clone()
        self.log("val/loss", F.mse_loss(self.layer(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class _RawWeights(Callback):
    """The weights after each optimizer step, as the optimizer left them."""

    def __init__(self) -> None:
        self.after: dict[int, torch.Tensor] = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.after[trainer.global_step] = pl_module.layer.weight.detach().clone()


def test_nt_asgd_averages_nothing_before_its_trigger_and_the_exact_mean_after_it():
    """12 SGD steps, a validation every 2, the switch forced at the first validation past 30 % of the
    steps (step 4): validations at steps 2 and 4 read the raw weights; every later one, and the final
    model, reads the uniform mean of the weights after steps 5, 6, ... up to it."""
    torch.manual_seed(0)
    x = torch.randn(32, 3)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.1 * torch.randn(32, 1)
    train = DataLoader(TensorDataset(x[:24], y[:24]), batch_size=2)
    val = DataLoader(TensorDataset(x[24:], y[24:]), batch_size=8)
    raw, averaging = _RawWeights(), NTASGD(nonmono=100, latest=0.3)  # nonmono 100: only `latest` switches
    model = _Regression()
    trainer = L.Trainer(max_steps=12, val_check_interval=2, callbacks=[raw, averaging], logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, accelerator="cpu")
    trainer.fit(model, train, val)
    assert averaging.switched_at == 4 and sorted(model.validated) == [2, 4, 6, 8, 10, 12]
    for step in (2, 4):
        assert torch.equal(model.validated[step], raw.after[step]), f"step {step}: an average before the trigger"
    for step in (6, 8, 10, 12):
        mean = torch.stack([raw.after[s] for s in range(5, step + 1)]).mean(0)
        torch.testing.assert_close(model.validated[step], mean, msg=f"step {step}: not the mean of steps 5..{step}")
    torch.testing.assert_close(model.layer.weight.detach(), torch.stack([raw.after[s] for s in range(5, 13)]).mean(0))
    assert int(averaging._average_model.n_averaged) == 8


AWD_TINY = ["experiment=ptb_awd_cpu", "model.embedding_size=16", "model.hidden_size=24", "data.batch_size=8",
            "data.bptt=10", "trainer.max_epochs=2", "trainer.limit_train_batches=12", "trainer.limit_val_batches=3",
            "trainer.limit_test_batches=3", "trainer.val_check_interval=4", "trainer.max_time=null",
            "callbacks.nt_asgd.nonmono=1"]


@pytest.mark.corpus("ptb")
def test_the_averaged_weights_are_validated_checkpointed_and_tested(cfg_factory, tmp_path, monkeypatch):
    # the trigger's criterion is tested above; here it fires at the second check so the run averages
    monkeypatch.setattr("seqbench.callbacks.nt_asgd.nonmonotone_trigger", lambda history, loss, n: len(history) >= 1)
    cfg = cfg_factory(AWD_TINY)
    metrics = train(cfg, tmp_path, choices={"model": "lstm", "data": "ptb"})
    assert metrics["status"] == "completed"
    ckpt = torch.load(metrics["tested_checkpoint"], map_location="cpu", weights_only=True)
    average, raw = ckpt["state_dict"], ckpt["current_model_state"]
    assert any(not torch.equal(average[k], raw[k]) for k in average)
    assert int(ckpt["averaging_state"]["n_averaged"]) > 1

    def evaluate(state: dict, split: str) -> float:
        plain = cfg_factory([*AWD_TINY, "~callbacks.nt_asgd"])
        datamodule, model = build(plain)
        model.load_state_dict(state)
        run = make_trainer(plain).validate if split == "val" else make_trainer(plain).test
        return run(model, datamodule=datamodule, verbose=False)[0][f"{split}/loss"]

    on_disk = json.loads((tmp_path / "metrics.json").read_text())
    assert evaluate(average, "val") == pytest.approx(on_disk["val/loss_best"], rel=1e-5)
    assert evaluate(raw, "val") != pytest.approx(on_disk["val/loss_best"], rel=1e-4)
    assert evaluate(average, "test") == pytest.approx(on_disk["test/loss"], rel=1e-5)


def test_every_variable_bptt_epoch_starts_at_window_0_and_only_a_checkpoint_moves_the_start(tmp_path):
    # Regression: the loader rebuilt each epoch used to start at the previous epoch's window count, so an
    # epoch whose random lengths gave more windows than the last trained only the surplus few.
    from seqbench.data.text import TextDataModule

    words = " ".join(f"w{i % 50}" for i in range(4000))
    for name in ("train", "valid"):
        (tmp_path / f"{name}.txt").write_text(words + "\n")
    dm = TextDataModule(str(tmp_path), train_file=str(tmp_path / "train.txt"), valid_file=str(tmp_path / "valid.txt"),
                        batch_size=4, bptt=10, variable_bptt=True, seed=0)
    dm.trainer = SimpleNamespace(current_epoch=0, reload_dataloaders_every_n_epochs=1, global_rank=0, world_size=1,
                                 training=True, lightning_module=None)
    dm.setup("fit")

    def first_windows(n_epochs: int) -> list[tuple[int, int, int]]:
        seen = []
        for epoch in range(n_epochs):
            dm.trainer.current_epoch = epoch
            loader = dm.train_dataloader()
            windows = [dm.on_before_batch_transfer(b, 0)["window"] for b in loader]
            seen.append((windows[0], len(windows), len(loader.dataset.windows())))
        return seen

    epochs = first_windows(6)
    assert {n for _, _, n in epochs} != {epochs[0][2]}  # the lengths do vary between epochs
    assert all(first == 0 and trained == total for first, trained, total in epochs)
    # a checkpoint taken after 3 windows of epoch 6 resumes at window 3 of epoch 6 ...
    dm.trainer.current_epoch = 6
    for batch, _ in zip(dm.train_dataloader(), range(3)):
        dm.on_before_batch_transfer(batch, 0)
    state = dm.state_dict()
    assert state == {"train_next_window": 3, "train_epoch": 6}
    dm.load_state_dict(state)
    assert next(iter(dm.train_dataloader()))["window"] == 3
    assert next(iter(dm.train_dataloader()))["window"] == 0  # ... once: the next reload starts the epoch over
    # ... and one saved at the end of epoch 6 starts the resumed epoch 7 at its first window
    dm.load_state_dict({"train_next_window": 2, "train_epoch": 6})
    dm.trainer.current_epoch = 7
    assert next(iter(dm.train_dataloader()))["window"] == 0
