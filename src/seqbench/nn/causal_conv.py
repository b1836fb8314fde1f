"""The causal depthwise convolution of the Mamba blocks, in the (B, T, C) layout the blocks compute in.

Both Mamba blocks (`seqbench.nn.ssm`, `seqbench.nn.ssd`) run a short depthwise convolution (kernel k = 4)
over time before their scan: out_t = bias + Σ_j w_j ⊙ u_{t-k+1+j}, each channel its own k taps, the
first k-1 inputs of a window taken from the state the previous window left (zeros at a stream's start).

`nn.Conv1d(C, C, k, groups=C)` computes it, but wants (B, C, T): two transposes each way, and on a CPU
its depthwise backward (oneDNN) cost more than the block's scan. Written as k shifted multiply-adds in
(B, T, C), forward and backward are a few passes over the activations each; the weights stay those of
the module's `nn.Conv1d` (C, 1, k) so checkpoints, counts and `step` read them as before.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqbench.nn.scan import without_autocast


class _ShiftedConv(torch.autograd.Function):
    """padded (B, T + k - 1, C), weight (C, k), bias (C,) -> out (B, T, C) = bias + Σ_j weight[:, j] padded[:, j:j+T]."""

    @staticmethod
    @without_autocast
    def forward(ctx, padded: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
        k = weight.shape[1]
        T = padded.shape[1] - k + 1
        out = torch.mul(padded[:, k - 1:], weight[:, k - 1])
        out += bias
        for j in range(k - 1):
            out.addcmul_(padded[:, j:j + T], weight[:, j])
        ctx.save_for_backward(padded, weight)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    @without_autocast
    def backward(ctx, grad: Tensor):
        padded, weight = ctx.saved_tensors
        k = weight.shape[1]
        T = grad.shape[1]
        grad = grad.contiguous()
        grad_padded = padded.new_zeros(padded.shape)
        grad_weight = weight.new_empty(weight.shape)
        flat = grad.view(-1, grad.shape[-1])  # (B T, C)
        work = torch.empty_like(grad)
        for j in range(k):
            grad_padded[:, j:j + T].addcmul_(grad, weight[:, j])
            # Σ over (b, t) of grad ⊙ input, per channel: a product then a column sum (a matmul with ones)
            torch.mul(grad, padded[:, j:j + T], out=work)
            grad_weight[:, j] = work.view(-1, grad.shape[-1]).sum(0)
        return grad_padded, grad_weight, flat.sum(0)


def depthwise(padded: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """padded (B, T + k - 1, C), weight (C, k), bias (C,) -> (B, T, C): the shifted multiply-adds."""
    return _ShiftedConv.apply(padded, weight, bias)


def depthwise_reference(padded: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """The same by `F.conv1d` with one group per channel, in its (B, C, T) layout: the readable form the
    tests hold the fast one to, and the one `torch.utils.flop_counter` sees as a convolution."""
    out = F.conv1d(padded.transpose(1, 2), weight.unsqueeze(1), bias, groups=weight.shape[0])  # (B, C, T)
    return out.transpose(1, 2)


def causal_conv(conv: nn.Conv1d, u: Tensor, conv_state: Tensor | None) -> tuple[Tensor, Tensor]:
    """The depthwise `conv` (C, 1, k) run causally over u (B, T, C): the kernel sees the step and the k-1
    before it, taken from conv_state (B, C, k-1) (zeros at the start). -> (conv (B, T, C), new conv_state)."""
    k = conv.kernel_size[0]
    B, T, C = u.shape
    if conv_state is None:
        conv_state = u.new_zeros(B, C, k - 1)
    padded = torch.cat([conv_state.transpose(1, 2).to(u.dtype), u], dim=1)  # (B, T + k - 1, C)
    out = depthwise(padded, conv.weight.view(C, k).to(u.dtype), conv.bias.to(u.dtype))
    return out, padded[:, T:].transpose(1, 2)  # the last k - 1 inputs, (B, C, k - 1)
