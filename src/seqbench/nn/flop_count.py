"""Training FLOPs per token measured on one step, for a layer that has no formula (`model=mixer`).

`torch.utils.flop_counter.FlopCounterMode` counts what torch dispatches, forward and backward: matmuls,
convolutions, attention kernels. It is the check of every formula in `seqbench.nn.flops` (tests/test_flops.py),
so a measured count and a formula follow the same convention (matmuls and convolutions, the backward
included, nothing for elementwise work), with one correction: torch's backward formula for a convolution
ignores `groups` for the weight's gradient and counts a depthwise convolution's (the SSM's, or a user's
short conv: E groups of one channel) as if every channel met every other, E times too many; here a
convolution's backward costs its forward once per gradient asked for, as in `seqbench.nn.flops`.

A kernel the counter cannot see into (oneDNN's fused LSTM, a custom CUDA op) counts 0: a layer built on one
should give its own formula (`train_flops_per_token`, seqbench.nn.mixer).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode, conv_flop_count


def grouped_conv_backward_flops(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation,
                                transposed, _output_padding, _groups, output_mask, out_shape=None,
                                **kwargs) -> int:
    """The backward of a convolution: each gradient asked for (input, weight) costs the forward's count."""
    gradients = bool(output_mask[0]) + bool(output_mask[1])
    return conv_flop_count(x_shape, w_shape, grad_out_shape, transposed) * gradients


CORRECTED = {torch.ops.aten.convolution_backward: grouped_conv_backward_flops}


def counted_flops(step: Callable[[], torch.Tensor]) -> int:
    """The FLOPs of `step()` (which returns a loss) and its backward, as FlopCounterMode counts them."""
    with FlopCounterMode(display=False, custom_mapping=CORRECTED) as counter:
        step().backward()
    return counter.get_total_flops()
