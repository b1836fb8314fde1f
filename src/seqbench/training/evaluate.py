"""Evaluate a saved checkpoint on a split, and sample from it: what `src/eval.py` runs.

The model and data configs come from the run that wrote the checkpoint (its `.hydra/config.yaml`),
so a checkpoint is evaluated with exactly the vocabulary and batching it was trained with; only
the data options given on the command line (e.g. `data.eval_batch_size=1`) change. Evaluation
uses the `trainer` group of this command, so `trainer=ddp_cpu` evaluates with two processes. When the
training run logged to W&B, the evaluation is a W&B run of job type `eval` in the training run's group
(read from its record, `seqbench.training.record`), named after it, with the metrics it computed.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import hydra
import lightning as L
from omegaconf import DictConfig, OmegaConf

from seqbench.callbacks.process_group_exit import DestroyProcessGroupAtExit
from seqbench.checkpoints import load_checkpoint
from seqbench.errors import ConfigError
from seqbench.training.config_check import check_ckpt_path
from seqbench.training.console import log_once
from seqbench.training.lightning_warnings import false_warnings_silenced
from seqbench.training.record import CONFIG, EVAL_METRICS, read_metrics, with_moved_targets, write_metrics
from seqbench.training.run import _finish_wandb, _is_rank_zero, build, closing_line, instantiate
from seqbench.training.tune import apply_tuning

log = logging.getLogger(__name__)


def training_run_dir(cfg: DictConfig) -> Path:
    return Path(cfg.run_dir) if cfg.get("run_dir") else Path(cfg.ckpt_path).resolve().parent.parent


def eval_loggers(cfg: DictConfig, run_cfg: DictConfig, output_dir: Path) -> list:
    """A W&B logger beside the training run's, when it had one: same project and tags, its group and
    name (as its record kept them: a sweep's group is chosen at run time), job type `eval`."""
    node = OmegaConf.select(run_cfg, "logger.wandb")
    if node is None or "_target_" not in node:
        return []
    recorded = read_metrics(training_run_dir(cfg)) or {}
    name = recorded.get("wandb_name") or run_cfg.get("run_name")
    return [instantiate(node, "logger.wandb", name=f"{name}-eval" if name else None, job_type=cfg.get("job_type", "eval"),
                        group=recorded.get("wandb_group") or OmegaConf.select(node, "group"),
                        save_dir=str(output_dir))]


def run_config(cfg: DictConfig) -> DictConfig:
    """The training run's config, with this command's data overrides merged in."""
    check_ckpt_path(cfg.ckpt_path)
    saved = training_run_dir(cfg) / CONFIG
    if not saved.is_file():
        raise ConfigError(f"{saved} not found: pass run_dir=<the run directory that wrote {cfg.ckpt_path}>.")
    run_cfg = with_moved_targets(OmegaConf.load(saved))  # a run saved before issue 68 names old module paths
    run_cfg.paths = cfg.paths  # resolve paths (data dir, outputs) on this machine, not the old one
    given = {k: v for k, v in OmegaConf.to_container(cfg.get("data") or {}, resolve=False).items() if v is not None}
    run_cfg.data = OmegaConf.merge(run_cfg.data, given)
    run_cfg.trainer = cfg.trainer
    apply_tuning(run_cfg)  # the size the run trained at: tune.per_family's, not the preset's default the file says
    return run_cfg


def evaluate(cfg: DictConfig, output_dir: Path) -> dict:
    started = time.time()
    log_once()
    L.seed_everything(cfg.seed, workers=True)
    if cfg.split not in ("valid", "test"):
        raise ConfigError(f"split={cfg.split} is not a split; choose valid or test.")
    run_cfg = run_config(cfg)
    datamodule, model = build(run_cfg)
    state = load_checkpoint(cfg.ckpt_path, f"ckpt_path={cfg.ckpt_path}")
    model.load_state_dict(state["state_dict"])
    bar = cfg.trainer.get("enable_progress_bar", True) and sys.stdout.isatty()  # as in training: not into a file
    loggers = eval_loggers(cfg, run_cfg, output_dir)
    trainer: L.Trainer = hydra.utils.instantiate(cfg.trainer, logger=loggers or False, enable_checkpointing=False,
                                                 default_root_dir=str(output_dir), enable_progress_bar=bar,
                                                 callbacks=[DestroyProcessGroupAtExit()])  # as in training
    for logger in trainer.loggers:  # what was evaluated: the checkpoint, the split and the run's config, once
        logger.log_hyperparams({"ckpt_path": str(cfg.ckpt_path), "split": cfg.split,
                                **{k: v for k, v in OmegaConf.to_container(run_cfg, resolve=True).items() if k != "hydra"}})
    run = trainer.validate if cfg.split == "valid" else trainer.test
    with false_warnings_silenced(datamodule):  # seqbench.training.lightning_warnings: the iterable's length, LeafSpec
        results = run(model, datamodule=datamodule, verbose=True)
    metrics = dict(results[0]) if results else {}
    metrics.update(ckpt_path=str(cfg.ckpt_path), split=cfg.split, world_size=trainer.world_size)
    if cfg.sample.prompt is not None and _is_rank_zero():
        metrics["samples"] = sample(model, datamodule.spec.tokenizer, cfg.sample)
        (output_dir / "samples.txt").write_text("\n\n".join(metrics["samples"]) + "\n")
        for text in metrics["samples"]:
            print(f"--- sample ---\n{text}")
    if _is_rank_zero():
        write_metrics(output_dir / EVAL_METRICS, metrics)
    _finish_wandb()
    if _is_rank_zero():
        log.info(closing_line(metrics, output_dir, time.time() - started, scores="val/" if cfg.split == "valid" else "test/",
                              record=EVAL_METRICS))
    return metrics


def sample(model, tokenizer, opts: DictConfig) -> list[str]:
    if not hasattr(model, "generate"):
        raise ConfigError(f"{type(model).__name__} cannot generate text.")
    prompt = tokenizer.encode(opts.prompt).unsqueeze(0).repeat(opts.num_samples, 1).to(model.device)
    out = model.generate(prompt, opts.max_new_tokens, temperature=opts.temperature, top_k=opts.top_k)
    return [tokenizer.decode(row.tolist()) for row in out]
