"""Learning-rate schedules the presets need that torch does not name directly.

Both return a `LambdaLR` whose multiplier is a small picklable object (a plain lambda would be lost
from the scheduler's state_dict, and a resumed run would not continue with the same LR).
`ReduceLROnPlateau` and the rest of `torch.optim.lr_scheduler` are used straight from torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


@dataclass
class _StepDecay:
    start_epoch: int
    factor: float

    def __call__(self, epoch: int) -> float:
        return self.factor ** max(epoch + 1 - self.start_epoch, 0)


def step_decay(optimizer: Optimizer, start_epoch: int, factor: float) -> LambdaLR:
    """Zaremba et al. (2014): constant LR for `start_epoch` epochs, then x`factor` every epoch.

    The TensorFlow reproduction computes lr_decay = factor ** max(i + 1 - max_epoch, 0) for epoch i
    (0-based); this is that formula, stepped once per epoch.
    """
    return LambdaLR(optimizer, _StepDecay(start_epoch, factor))


@dataclass
class _WarmupCosine:
    warmup_steps: int
    total_steps: int
    min_ratio: float

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        return self.min_ratio + (1 - self.min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_cosine(optimizer: Optimizer, total_steps: int, warmup_steps: int = 100, min_ratio: float = 0.1,
                  max_warmup_fraction: float | None = None) -> LambdaLR:
    """Linear warmup then cosine decay to `min_ratio` x the peak LR (GPT-2/nanoGPT); step interval.

    `total_steps` is filled in from the trainer's estimate when the config leaves it out.
    `max_warmup_fraction` caps the warmup at that fraction of the run: a recipe's 200 warmup steps
    would be all of a short run's steps (experiment=frontier trains some sizes for a few hundred).
    """
    if max_warmup_fraction is not None:
        warmup_steps = max(1, min(warmup_steps, int(max_warmup_fraction * total_steps)))
    return LambdaLR(optimizer, _WarmupCosine(warmup_steps, total_steps, min_ratio))


@dataclass
class _InverseSqrt:
    warmup_steps: int

    def __call__(self, step: int) -> float:
        step = step + 1
        return min(step / self.warmup_steps, math.sqrt(self.warmup_steps / step))


def inverse_sqrt(optimizer: Optimizer, warmup_steps: int = 4000) -> LambdaLR:
    """Vaswani et al. (2017) §5.3: linear warmup for `warmup_steps`, then decay ∝ step^-1/2; step interval.

    The paper's lrate = d_model^-0.5 · min(step^-0.5, step · warmup^-1.5) peaks at step = warmup
    with d_model^-0.5 · warmup^-0.5; here the optimizer's LR is that peak (set it to the paper's value
    to reproduce it, e.g. 7e-4 for d_model 512 and 4000 warmup steps), and the multiplier is
    min(step / warmup, sqrt(warmup / step)).
    """
    return LambdaLR(optimizer, _InverseSqrt(warmup_steps))
