"""The linear scan h_t = a_t h_{t-1} + b_t against the plain step loop: outputs and gradients."""

from __future__ import annotations

import pytest
import torch

from seqbench.nn.scan import linear_scan, log_space_scan, scan_step


def step_loop(a, b, h0):
    """The reference: one `scan_step` per time step, differentiated by autograd."""
    h, states = h0, []
    for t in range(b.shape[1]):
        h = scan_step(a[:, t], b[:, t], h)
        states.append(h)
    return torch.stack(states, dim=1)


def inputs(T: int, positive: bool = False, with_h0: bool = True, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(3, T, 4, 2, generator=g, dtype=torch.float64) * 0.7 + 0.3  # decays in [0.3, 1)
    b = torch.randn(3, T, 4, 2, generator=g, dtype=torch.float64)
    h0 = torch.randn(3, 4, 2, generator=g, dtype=torch.float64) if with_h0 else None
    if positive:  # the log-space scan's domain (minGRU/minLSTM: b = gate * g(.) > 0)
        b, h0 = b.abs() + 0.1, None if h0 is None else h0.abs() + 0.1
    return [t.requires_grad_() for t in (a, b, h0) if t is not None], h0 is not None


def value_and_grads(fn, tensors, weight):
    out = fn(*tensors)
    return [out, *torch.autograd.grad((out * weight).sum(), tensors, materialize_grads=True)]


@pytest.mark.parametrize("method", ["loop", "doubling", "log"])
@pytest.mark.parametrize("T", [1, 2, 7, 1024])
@pytest.mark.parametrize("with_h0", [True, False])
def test_scan_matches_step_loop_in_float64(method, T, with_h0):
    """Every scan's states and its gradients for a, b and h0 equal the step loop's to 1e-10."""
    tensors, has_h0 = inputs(T, positive=method == "log", with_h0=with_h0)
    weight = torch.randn(tensors[1].shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    ref = value_and_grads(lambda a, b, h0=None: step_loop(a, b, h0), tensors, weight)
    got = value_and_grads(lambda a, b, h0=None: linear_scan(a, b, h0, method), tensors, weight)
    for name, r, x in zip(["h", "dL/da", "dL/db", "dL/dh0"], ref, got):
        err = (r - x).abs().max().item()
        assert err <= 1e-10, f"{method}, T={T}: {name} differs from the step loop by {err:.2e}"


@pytest.mark.parametrize("method", ["loop", "doubling"])
def test_hand_written_backward_passes_gradcheck(method):
    (a, b, h0), _ = inputs(6)
    a, b, h0 = (t.detach()[:2, ..., :1].clone().requires_grad_() for t in (a, b, h0))  # few Jacobian columns
    assert torch.autograd.gradcheck(lambda a, b, h0: linear_scan(a, b, h0, method), (a, b, h0))
    assert torch.autograd.gradcheck(lambda a, b: linear_scan(a, b, None, method), (a, b))


def test_time_invariant_decay_broadcasts_and_sums_its_gradient():
    """A constant a (the SSM control's) expands over time; its gradient is the sum over steps."""
    (a, b, h0), _ = inputs(33)
    a_const = a[:, :1].detach().clone().requires_grad_()  # (B, 1, *F)
    weight = torch.randn_like(b)
    for method in ("loop", "doubling"):
        got = torch.autograd.grad((linear_scan(a_const, b, h0, method) * weight).sum(), a_const)[0]
        ref = torch.autograd.grad((step_loop(a_const.expand_as(b), b, h0) * weight).sum(), a_const)[0]
        assert (got - ref).abs().max() <= 1e-10


def test_log_space_scan_takes_logs_directly():
    """`log_space_scan` is the same recurrence given log a, log b, log h0 (the min-RNNs' stable gates)."""
    (a, b, h0), _ = inputs(64, positive=True)
    got = log_space_scan(a.log(), b.log(), h0.log())
    assert (got - step_loop(a, b, h0)).abs().max() <= 1e-10


def test_unknown_method_names_the_choices():
    (a, b, h0), _ = inputs(4)
    with pytest.raises(ValueError, match="loop"):
        linear_scan(a, b, h0, "cumsum")
