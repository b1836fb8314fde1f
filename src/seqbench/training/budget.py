"""A run's length as training compute: `budget.flops` sets the steps, `budget.evals` the validations.

    python src/train.py model=gpt data=shakespeare_char budget.flops=1e13       # 10 validations on the way

The budget is turned into `trainer.max_steps` before training, from the family's FLOPs formula
(`flops_per_token`, `seqbench.nn.flops`) and the shape of a training batch, instead of a callback
that stops the run when its counter passes the budget. One step of a run costs the same FLOPs every
time (the batch shape is fixed), so the two stop at the same step; but only a step count known in
advance lets the learning-rate schedule end with the run: `warmup_cosine` reads its length from
`max_steps`, and a run cut off by a callback would stop half-way down its cosine, at a higher rate
than a run planned for that budget — the small-budget runs of a frontier would be judged unfairly.

Validation happens every budget/evals FLOPs (`val_check_interval` in steps, across epochs), so the
curves of different sizes are sampled at the same compute. The step count is rounded to a multiple
of `evals`: a run spends the budget to within evals/2 steps (the exact count is logged as
`train/flops`). A bound on training batches (`trainer.limit_train_batches`, as `debug=fast` sets)
wins over the budget: that run is a smoke test.
"""

from __future__ import annotations

import logging

from omegaconf import DictConfig, open_dict

from seqbench.errors import ConfigError

log = logging.getLogger(__name__)


def budget_steps(budget_flops: float, step_flops: float, evals: int) -> tuple[int, int]:
    """(max_steps, steps between validations) that spend `budget_flops` in `evals` equal intervals."""
    interval = round(budget_flops / evals / step_flops)
    if interval < 1:
        raise ConfigError(f"budget.flops={budget_flops:.3g} buys {budget_flops / step_flops:.1f} steps of this model "
                          f"({step_flops:.3g} FLOPs each), fewer than budget.evals={evals} validations: raise the "
                          "budget, or choose a smaller model or batch.")
    return interval * evals, interval


def apply_compute_budget(cfg: DictConfig, model, datamodule) -> dict:
    """Set the trainer's steps and validation interval from `cfg.budget`; returns what the run's record keeps."""
    budget = cfg.get("budget") or {}
    flops = budget.get("flops")
    if flops is None:
        return {}
    try:
        flops, evals = float(flops), int(budget.get("evals") or 10)
    except (TypeError, ValueError):
        raise ConfigError(f"budget.flops={flops} and budget.evals={budget.get('evals')} must be numbers "
                          "(e.g. budget.flops=1e13 budget.evals=10).") from None
    if flops <= 0 or evals < 1:
        raise ConfigError(f"budget.flops must be positive and budget.evals at least 1 (got {flops:g} and {evals}).")
    if cfg.trainer.get("limit_train_batches") not in (None, 1.0) or cfg.trainer.get("fast_dev_run"):
        log.info("budget.flops=%.3g is ignored: trainer.limit_train_batches bounds this run (debug)", flops)
        return {}
    shape = getattr(datamodule, "train_batch_shape", None)
    per_token = model.flops_per_token(shape(model)[1]) if shape else None
    if per_token is None:
        raise ConfigError(f"budget.flops counts the training FLOPs of language models; {type(model).__name__} on "
                          f"{datamodule.spec.task!r} has no FLOPs formula: use trainer.max_steps or max_time instead.")
    rows, length = shape(model)
    accumulate = int(cfg.trainer.get("accumulate_grad_batches") or 1)
    step_flops = per_token * rows * length * accumulate  # one optimizer step
    max_steps, interval = budget_steps(flops, step_flops, evals)
    with open_dict(cfg.trainer):
        cfg.trainer.max_steps = max_steps
        cfg.trainer.max_epochs = -1
        cfg.trainer.val_check_interval = interval * accumulate  # Lightning counts batches here
        cfg.trainer.check_val_every_n_epoch = None  # every interval of the whole run, across epochs
    log.info("budget %.3g FLOPs: %s steps of %.3g FLOPs (%s tokens x %.3g per token), validation every %s steps",
             flops, f"{max_steps:,}", step_flops, f"{rows * length * accumulate:,}", per_token, f"{interval:,}")
    return {"budget/flops": flops, "budget/max_steps": max_steps, "budget/step_flops": step_flops,
            "flops_per_token": per_token}
