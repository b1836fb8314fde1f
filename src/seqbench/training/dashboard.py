"""What a W&B run carries so that a sweep reads as a dashboard without editing panels.

* **Config keys a panel is drawn from**, at the top level beside the resolved config: `family`
  (what the model config builds: rnn, lstm, gru, gpt, ...; seqbench.identity), `architecture` (the
  model config chosen: `model=lstm` for the three recurrent PTB presets), `preset`
  (`preset=...`, `+family=...` in a run from before issue 34, or the experiment), `recipe`
  (the training recipe chosen for the run, when there is one), `corpus` (the data config), `task`
  (what the data poses), `params`, `params_non_embedding`, and `train_flops` once training has
  counted them (when a run logs `train/flops`). A parallel-coordinates or scatter panel picks them
  straight from the run table.
* **Best values in the summary.** W&B's summary keeps the last logged value by default, so a
  sweep table sorted by `val/ppl` sorts by the last epoch. Every validation metric the task logs is
  defined with its direction (`define_metric(summary="min,last")` or `"max,last"`): the summary
  holds `val/ppl.min` and `val/ppl.last`, and the checkpoint monitors get the direction their
  `ModelCheckpoint` uses.
* **The tested checkpoint's numbers.** After the test, the summary gets the `test/...` metrics of
  the checkpoint that was tested, its validation score (`<monitor>_best`) and its path.

Runs without a W&B logger are not touched.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from seqbench.callbacks.validation_samples import wandb_loggers
from seqbench.identity import family, preset_of

STEP = "trainer/global_step"  # Lightning's WandbLogger plots every metric against this


def run_config(cfg: DictConfig, choices: dict | None, task: str, params: int, params_non_embedding: int) -> dict:
    """The panel keys, then the resolved config as Hydra composed it, nested (`model.hidden_size`): the
    hyperparameters every logger records, once (the models save theirs with `logger=False`)."""
    def choice(group: str) -> str | None:
        return (choices or {}).get(group) or OmegaConf.select(cfg, f"hydra.runtime.choices.{group}", default=None)

    composed = {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k != "hydra"}  # Hydra's own
    return {"family": family(cfg, choices), "architecture": choice("model"),
            "preset": preset_of({g: choice(g) for g in ("preset", "family")}) or choice("experiment"),
            "recipe": cfg.get("recipe"),
            "corpus": choice("data"), "task": task, "params": params, "params_non_embedding": params_non_embedding,
            **composed}


def wandb_identity(trainer) -> dict[str, str]:
    """The W&B run's name and group, for the run's record: `src/eval.py` logs its evaluation beside it,
    and a sweep's group (`sweep-<time>`) is chosen at run time, not in the config."""
    for logger in wandb_loggers(trainer) if trainer.is_global_zero else []:
        run = logger.experiment
        return {"wandb_name": run.name, "wandb_group": run.group}
    return {}


def define_summaries(trainer, task) -> dict[str, str]:
    """{metric: "min" | "max"} for the validation metrics, declared to every W&B run of `trainer`."""
    directions = {f"val/{name}": d for name, d in getattr(task, "directions", {}).items()}
    for callback in trainer.checkpoint_callbacks:
        if getattr(callback, "monitor", None):
            directions[callback.monitor] = callback.mode
    for logger in wandb_loggers(trainer):
        for name, direction in directions.items():
            logger.experiment.define_metric(name, step_metric=STEP, summary=f"{direction},last")
    return directions


def write_summary(trainer, metrics: dict[str, Any]) -> None:
    """The tested checkpoint's test metrics and validation score in the summary; FLOPs in the config."""
    loggers = wandb_loggers(trainer)
    if not loggers or not trainer.is_global_zero:  # other ranks hold a stand-in with no summary
        return
    tested = {k: float(v) for k, v in metrics.items() if k.startswith("test/") and _number(v)}
    tested.update({k: v for k, v in metrics.items() if k.endswith("_best") and _number(v)})
    if metrics.get("tested_checkpoint"):
        tested["tested_checkpoint"] = metrics["tested_checkpoint"]
    flops = metrics.get("train/flops")
    for logger in loggers:
        logger.experiment.summary.update(tested)
        if _number(flops):
            logger.experiment.config.update({"train_flops": float(flops)}, allow_val_change=True)


def _number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, (str, bool))
