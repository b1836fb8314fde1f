"""The worked example of a layer from outside the package, examples/lru.py (the Linear Recurrent Unit of
Orvieto et al. 2023): its parallel scan and its step form are its recurrence, written out here as a loop;
its initialisation is the paper's ring with the γ normalisation; and it trains through
`model=mixer model.mixer=examples.lru:LRU`, with its training FLOPs measured (it gives no formula).
"""

from __future__ import annotations

import math

import pytest
import torch

from conftest import ROOT
from seqbench.data.spec import TaskSpec
from seqbench.models.mixer import MixerModel

PATH = "examples.lru:LRU"


@pytest.fixture(autouse=True)
def checkout_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ sits beside src/, as a user's package beside theirs


@pytest.fixture
def lru():
    from examples.lru import LRU

    torch.manual_seed(0)
    return LRU(6, d_state=5, r_min=0.5, r_max=0.99, max_phase=math.pi)


def loop(layer, u: torch.Tensor, x: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The recurrence one step at a time, from the parameters as the paper writes it."""
    lam = torch.exp(-torch.exp(layer.nu_log) + 1j * torch.exp(layer.theta_log))  # (N,)
    B = torch.complex(layer.B_re, layer.B_im)  # (N, H)
    C = torch.complex(layer.C_re, layer.C_im)  # (H, N)
    gamma = torch.exp(layer.gamma_log)
    x = torch.zeros(u.size(0), lam.numel(), dtype=torch.cfloat) if x is None else x
    ys = []
    for t in range(u.size(1)):
        x = lam * x + gamma * (u[:, t].to(torch.cfloat) @ B.T)
        ys.append((x @ C.T).real + layer.D * u[:, t])
    return torch.stack(ys, 1), x


def test_the_parallel_scan_and_the_step_are_the_written_out_recurrence(lru):
    # bugs caught: a doubling pass that does not square λ's power; a carried state folded in without its λ
    u = torch.randn(3, 13, 6)  # T = 13: not a power of two, so a ragged last doubling pass is exercised
    with torch.no_grad():
        y, state = lru(u[:, :7])
        y_ref, x_ref = loop(lru, u[:, :7])
        torch.testing.assert_close(y, y_ref, atol=1e-5, rtol=1e-5)
        y2, _ = lru(u[:, 7:], state)  # the next window from the carried state
        torch.testing.assert_close(y2, loop(lru, u[:, 7:], x_ref)[0], atol=1e-5, rtol=1e-5)
        step_y, s = [], None
        for t in range(13):
            y_t, s = lru.step(u[:, t], s)
            step_y.append(y_t)
        torch.testing.assert_close(torch.stack(step_y, 1), loop(lru, u)[0], atol=1e-5, rtol=1e-5)


def test_the_initialisation_is_the_papers_ring_with_the_gamma_normalisation(lru):
    # bug caught: γ left at 1, so a channel with |λ| near 1 starts with a state 1/sqrt(1-|λ|²) times the input's
    modulus, phase = lru.lam().abs(), lru.lam().angle().remainder(2 * math.pi)
    assert (modulus >= 0.5 - 1e-6).all() and (modulus <= 0.99 + 1e-6).all() and (phase <= math.pi + 1e-6).all()
    torch.testing.assert_close(torch.exp(lru.gamma_log), torch.sqrt(1 - modulus**2))


def test_the_lru_trains_as_a_mixer_and_its_flops_are_measured(tmp_path):
    from conftest import FIXTURES, compose_cfg
    from seqbench.training.run import build, make_trainer

    cfg = compose_cfg(["model=mixer", f"model.mixer={PATH}", "model.d_model=8", "data=text",
                       f"data.train_file={FIXTURES / 'text' / 'train.txt'}", f"data.valid_file={FIXTURES / 'text' / 'valid.txt'}",
                       "data.batch_size=4", "data.eval_batch_size=2", "data.bptt=8", "logger=csv", "trainer=cpu",
                       "trainer.max_steps=2", "trainer.limit_val_batches=1", "trainer.num_sanity_val_steps=0",
                       "trainer.enable_progress_bar=false", "~callbacks.progress_bar", "~callbacks.model_summary",
                       "~callbacks.step_checkpoint", "test=false"], tmp_path)
    datamodule, model = build(cfg)
    trainer = make_trainer(cfg)
    trainer.fit(model, datamodule=datamodule)
    assert trainer.global_step == 2 and model.flops_source == "measured"
    # measured: its four H x N matmuls (B's and C's real and imaginary parts), 3x for training, per layer, and
    # the output projection; the scan is elementwise, which no formula of seqbench counts either
    H = N = 8
    V = model.spec.vocab_size
    expected = model.hparams.num_layers * 3 * 4 * 2 * H * N + 3 * 2 * H * V
    assert model.flops_per_token(8) == pytest.approx(expected, rel=0.01)


def test_the_lru_reads_the_probes_as_a_mixer():
    model = MixerModel(TaskSpec("tagging", vocab_size=10, num_classes=10, pad_id=0), torch.optim.SGD, mixer=PATH,
                       d_model=8, num_layers=1)
    logits = model.tag({"input": torch.randint(1, 10, (2, 7)), "lengths": torch.tensor([7, 5])})
    assert logits.shape == (2, 7, 10) and torch.isfinite(logits).all()
