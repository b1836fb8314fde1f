"""A job's tuning setting, applied before anything is built: the run's part of equal-budget tuning.

`tune:` in a config (`seqbench.protocol.tuning` says why the search is the same for every family)
sets this run's size, scales its recipe's learning rate, replaces its schedule and clipping
(`apply_tuning`), and sets the tokens of a training step (`apply_tokens_per_step`, once the model is
built: its family says which length a row has). `settings` is the setting a job trains with, which the
sweep archive keys a job by too. What was applied goes into the run's record as `tune/...`.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf, open_dict

from seqbench.errors import ConfigError
from seqbench.families import family_of

SEARCHED = ("lr_scale", "tokens_per_step")
PER_FAMILY = (*SEARCHED, "size")  # a family's entry of tune.per_family: the search's result and its chosen size
NEUTRAL = {"lr_scale": 1.0, "tokens_per_step": None}  # the values of tune.<key> that leave a recipe as it is


def settings(cfg: DictConfig) -> dict:
    """The searched values this run uses (the sweep's, or its family's entry of `tune.per_family`), and
    `size` where that entry chooses one."""
    tune = cfg.get("tune") or {}
    out = {k: tune.get(k) for k in SEARCHED}
    own = (tune.get("per_family") or {}).get(family_of(cfg.model)) or {}
    unknown = set(own) - set(PER_FAMILY)
    if unknown:
        raise ConfigError(f"tune.per_family sets {sorted(unknown)}; it takes only {', '.join(PER_FAMILY)}.")
    for key, neutral in NEUTRAL.items():  # both set: a sweep over tune.<key> would run one job per value, all alike
        if own.get(key) is not None and out[key] not in (None, neutral):
            raise ConfigError(f"tune.per_family.{family_of(cfg.model)}.{key}={own[key]} and tune.{key}={out[key]} "
                              f"both set this run's {key}, and per_family wins: a sweep over tune.{key} would train "
                              f"the same run once per value. Add tune.{key}={neutral if neutral is not None else 'null'} "
                              f"(the final cells' sweeps do).")
    return {**out, **{k: v for k, v in own.items() if v is not None}}


def _apply_size(cfg: DictConfig, size) -> dict:
    """`tune.per_family.<family>.size` replaces `size` before anything reads the preset's
    `${sizes.${size}...}` dimensions; a size the preset's table lacks stops here, not in the model."""
    sizes = cfg.get("sizes")
    if size is not None:
        if sizes is None:
            raise ConfigError(f"tune.per_family.{family_of(cfg.model)}.size={size} picks a size of a frontier "
                              f"preset, and this config has no `sizes` table (preset=frontier/<corpus>/<family>).")
        cfg.size = str(size)
    if sizes is None or cfg.get("size") is None:
        return {}
    if str(cfg.size) not in sizes:
        raise ConfigError(f"size={cfg.size} is not one of this preset's sizes: {', '.join(map(str, sizes))}.")
    return {"tune/size": str(cfg.size)}


def apply_tuning(cfg: DictConfig) -> dict:
    """Set the family's size, scale the learning rate, replace the schedule and the clipping (before
    the config is shown or the model built); returns what the run's record keeps."""
    tune = cfg.get("tune")
    if not tune:
        return {}
    chosen = settings(cfg)
    with open_dict(cfg):
        record = _apply_size(cfg, chosen.get("size"))
        if chosen["lr_scale"] is not None:
            recipe = float(cfg.model.optimizer.lr)
            cfg.model.optimizer.lr = recipe * float(chosen["lr_scale"])
            record.update({"tune/lr_scale": float(chosen["lr_scale"]), "tune/recipe_lr": recipe,
                           "tune/lr": cfg.model.optimizer.lr})
        if tune.get("schedule") is not None:
            cfg.model.scheduler = OmegaConf.create(OmegaConf.to_container(tune.schedule))
            cfg.model.scheduler_interval = "step"  # a rate that ends with max_steps moves every step
            cfg.model.scheduler_monitor = None
            record["tune/schedule"] = str(tune.schedule.get("_target_"))
        if tune.get("gradient_clip_val") is not None:
            cfg.trainer.gradient_clip_val = tune.gradient_clip_val
            record["tune/gradient_clip_val"] = float(tune.gradient_clip_val)
    return record


def apply_tokens_per_step(cfg: DictConfig, model, datamodule) -> dict:
    """Streams (recurrent) or windows (attention) per step for `tokens_per_step` (after the model is
    built: its family says which length a row has); before `budget.flops` turns FLOPs into steps."""
    tokens = settings(cfg)["tokens_per_step"] if cfg.get("tune") else None
    if tokens is None:
        return {}
    shape = getattr(datamodule, "train_batch_shape", None)
    if shape is None:
        raise ConfigError("tune.tokens_per_step sets the tokens of a language model's training step; "
                          f"{type(datamodule).__name__} has no such shape: leave it null.")
    length = shape(model)[1]
    rows = max(1, round(float(tokens) / length))
    datamodule.batch_size = rows
    with open_dict(cfg):
        cfg.data.batch_size = rows
    return {"tune/tokens_per_step": rows * length, "tune/batch_size": rows}
