"""From a composed config to a trained, tested model and its record: what `src/train.py` runs.

The order is chosen so that everything a user can get wrong fails before any work: the config is
checked against the constructors' signatures and the model/data pair against the tasks the family
supports, then data is prepared, the model built from the data's `TaskSpec`, and only then does
training start. Every run directory ends with its record (`seqbench.training.record`) — the final metrics under their logged
names plus what is needed to compare runs (params, wall time, tokens/s, device, git commit,
overrides, date, hardware) — also when the run fails, so a sweep's failed job is visible beside the others.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import hydra
import lightning as L
import torch
from hydra.errors import InstantiationException
from lightning.pytorch.callbacks import ProgressBar
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig

from seqbench.callbacks import DestroyProcessGroupAtExit, LearningCurve, RunStats, StopWhenSolved
from seqbench.callbacks.preemption import requeued_checkpoint
from seqbench.checkpoints import load_checkpoint
from seqbench.compose import describe as describe_recipe
from seqbench.errors import ConfigError, UserError
from seqbench.provenance import git_commit, hardware, utc_now
from seqbench.training.budget import apply_compute_budget
from seqbench.training.config_check import check_config
from seqbench.training.console import log_once, show_config
from seqbench.training.csv_logger import CSVLogger
from seqbench.training.dashboard import define_summaries, run_config, wandb_identity, write_summary
from seqbench.training.lightning_warnings import false_warnings_silenced
from seqbench.training.record import METRICS, completed, read_metrics, write_metrics
from seqbench.training.tune import apply_tokens_per_step, apply_tuning

log = logging.getLogger(__name__)


def instantiate(node: DictConfig, where: str, **kwargs):
    """hydra.utils.instantiate, with a constructor's complaint turned into a one-sentence ConfigError."""
    try:
        return hydra.utils.instantiate(node, **kwargs)
    except InstantiationException as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, UserError):
            raise cause from None
        raise ConfigError(f"{where}: {cause}") from None


def instantiate_list(node: DictConfig | None, where: str) -> list:
    return [instantiate(c, f"{where}.{k}") for k, c in (node or {}).items() if c is not None and "_target_" in c]


def make_trainer(cfg: DictConfig) -> L.Trainer:
    callbacks = instantiate_list(cfg.get("callbacks"), "callbacks")
    # A progress bar redraws a terminal line; written to a file it is noise (ProgressLog's lines are
    # what a log file needs), so it is shown only when the output is a terminal.
    bar = cfg.trainer.get("enable_progress_bar", True) and sys.stdout.isatty()
    if not bar:
        callbacks = [c for c in callbacks if not isinstance(c, ProgressBar)]
    loggers = instantiate_list(cfg.get("logger"), "logger")
    callbacks.append(DestroyProcessGroupAtExit())  # not the user's to drop: exiting must not abort a DDP rank
    return instantiate(cfg.trainer, "trainer", callbacks=callbacks, logger=loggers or False,
                       enable_progress_bar=bar)


def build(cfg: DictConfig, choices: dict | None = None):
    """Checked config -> (datamodule, model); the data is set up first because the model reads its spec."""
    check_config(cfg, choices)
    datamodule = instantiate(cfg.data, "data")
    datamodule.prepare_data()
    datamodule.setup("fit")
    model = instantiate(cfg.model, "model", spec=datamodule.spec)
    return datamodule, model


def set_matmul_precision(precision: str) -> None:
    """`matmul_precision`: "high" lets a GPU multiply fp32 in TF32 (10-bit mantissas); "highest" keeps fp32
    everywhere, cuDNN's recurrent and convolution kernels too (torch leaves `cudnn.allow_tf32` on, apart from
    the matmul setting), so a GPU run computes what a CPU run does and may join CPU runs in one comparison
    (`SEQBENCH_MATMUL_PRECISION=highest`: scripts/gpu_session.sh's campaign phase)."""
    torch.set_float32_matmul_precision(precision)
    torch.backends.cudnn.allow_tf32 = precision != "highest"


def finished_before(output_dir: Path) -> dict | None:
    """The record of a sweep's job that finished in this directory at an earlier launch (or was restored
    there from the sweep archive: `seqbench.protocol.sweep_archive.ArchiveCallback`), which is not trained
    again; None for any other. The resumable launcher skips such a job before it starts; under any other
    launcher (submitit's) the job starts, and this is where it stops."""
    if not completed(output_dir):
        return None
    log.info("%s: completed before (%s); not trained again", output_dir,
             "restored from the sweep archive" if (read_metrics(output_dir) or {}).get("restored_from") else "its record")
    return read_metrics(output_dir)


def train(cfg: DictConfig, output_dir: Path, choices: dict | None = None, overrides: list[str] | None = None) -> dict:
    """Fit, test from the best checkpoint, and write the run's record; returns the metrics."""
    started, cpu_started = time.time(), time.process_time()
    commit = git_commit(Path(__file__).resolve().parent)  # at launch: the code that runs, not the HEAD at the end
    # the ledger's provenance (seqbench.reports.ledger): when it started and, below, on what machine and code
    metrics: dict[str, Any] = {"status": "running", "overrides": " ".join(overrides or []), "date": utc_now()}
    metrics_path = output_dir / METRICS
    if _is_rank_zero():  # a resumed job's folder holds the record of the run that stopped: it runs again
        write_metrics(metrics_path, metrics)
    # the run's setting is the run's: restored after it
    precision, cudnn_tf32 = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    quiet = ExitStack()  # Lightning's warnings that are false for this run (seqbench.training.lightning_warnings)
    try:
        log_once()
        # tune: the family's size, the search's lr, schedule and clipping; before the config is shown and resolved
        metrics.update(apply_tuning(cfg))
        if _is_rank_zero():
            show_config(cfg, output_dir)
        log.info(describe_recipe(cfg))
        if cfg.get("seed") is not None:
            L.seed_everything(cfg.seed, workers=True)
        set_matmul_precision(cfg.get("matmul_precision", "high"))
        datamodule, model = build(cfg, choices)
        metrics.update(apply_tokens_per_step(cfg, model, datamodule))  # before the budget counts a step's tokens
        metrics.update(apply_compute_budget(cfg, model, datamodule))  # sets the trainer's steps from budget.flops
        trainer = make_trainer(cfg)
        metrics.update(getattr(datamodule, "eval_context", lambda m: {})(model))  # lm: context of a scored token
        metrics.update(getattr(datamodule, "data_record", dict)())  # lm: the training split's tokens (passes over it)
        params = model.num_params()
        metrics.update(params=params, params_non_embedding=model.num_params(non_embedding=True))
        log.info("%s: %s parameters (%s without embeddings)", type(model).__name__, f"{params:,}",
                 f"{metrics['params_non_embedding']:,}")
        # the resolved config, nested as Hydra composed it, once (the models save theirs with logger=False),
        # after the keys a W&B panel is drawn from: family, preset, corpus, task, recipe, sizes (seqbench.training.dashboard)
        hparams = run_config(cfg, choices, datamodule.spec.task, params, metrics["params_non_embedding"])
        ckpt_path = _resume_from(cfg, trainer) if cfg.get("train", True) else None
        kept = _keep_history(trainer, ckpt_path)  # before a logger writes: Lightning's CSV writer starts a new file
        quiet.enter_context(false_warnings_silenced(datamodule, kept, ckpt_path))  # until the run ends
        for logger in trainer.loggers:
            logger.log_hyperparams(hparams)
        define_summaries(trainer, model.task)
        metrics.update(wandb_identity(trainer))
        if cfg.get("train", True):
            # weights_only: Lightning reads the checkpoint with torch's safe unpickler (seqbench.checkpoints)
            trainer.fit(model, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
        metrics.update({k: v for k, v in trainer.callback_metrics.items()})
        for solve in (c for c in trainer.callbacks if isinstance(c, StopWhenSolved)):
            metrics.update(solve.summary())  # solved, steps_to_solve (train until solved, the probes)
        ckpt = trainer.checkpoint_callback
        if ckpt is not None and ckpt.best_model_score is not None:
            # the validation score of the tested checkpoint (val/acc above is the last epoch's), so a
            # hyperparameter can be chosen on validation alone (seqbench.reports.finetune_report --grid)
            metrics[f"{ckpt.monitor}_best"] = float(ckpt.best_model_score)
        if cfg.get("test", True):
            best = trainer.checkpoint_callback.best_model_path if trainer.checkpoint_callback else ""
            if cfg.get("train", True) and not best:
                log.warning("no best checkpoint was saved; testing the current weights")
            results = trainer.test(model, datamodule=datamodule, ckpt_path=best or None, weights_only=True)
            metrics.update(results[0] if results else {})
            metrics.update(getattr(model.task, "summary", dict)())  # e.g. translation: BLEU signatures
            metrics["tested_checkpoint"] = best or None
        stats = next((c for c in trainer.callbacks if isinstance(c, RunStats)), None)
        if stats is not None:
            metrics.update(stats.summary(model))
            metrics["tokens_per_s"] = metrics["train/tokens_per_s"]
        curve = next((c for c in trainer.callbacks if isinstance(c, LearningCurve)), None)
        if curve is not None:
            metrics.update(curve.summary())  # train/flops at the end of training, not at the last validation
        workers = cfg.data.get("num_workers", 0) or 0
        metrics.update(status="completed", device=_device_name(trainer, workers), world_size=trainer.world_size)
        write_summary(trainer, metrics)
        return metrics
    except BaseException as exc:
        # told to stop (SIGTERM: a pre-empted job, a paused chain): CheckpointOnSignal saved last.ckpt, and
        # the same command resumes from it, so the run is stopped, not failed
        stopped = isinstance(exc, SIGTERMException)
        metrics.update(status="stopped" if stopped else "failed", error=f"{type(exc).__name__}: {exc}")
        raise
    finally:
        quiet.close()
        torch.set_float32_matmul_precision(precision)
        torch.backends.cudnn.allow_tf32 = cudnn_tf32
        metrics["wall_time_s"] = time.time() - started
        # this process's CPU seconds, all threads (LearningCurve's docstring: a shared or paused machine's
        # wall time holds other work; this does not)
        metrics["cpu_time_s"] = time.process_time() - cpu_started
        metrics["git_commit"] = commit
        metrics["hardware"] = hardware()  # the CPU model too: `device` names only what trained
        if _is_rank_zero():
            write_metrics(metrics_path, metrics)
        _finish_wandb()
        if metrics["status"] == "completed" and _is_rank_zero():
            log.info(closing_line(metrics, output_dir, metrics["wall_time_s"]))  # after W&B's own summary


def closing_line(metrics: dict[str, Any], output_dir: Path, seconds: float, scores: str = "test/",
                 record: str = METRICS) -> str:
    """A completed run's last line (after W&B's summary, rank zero only): its finite `scores` (the metrics
    under that prefix) and where its files are, so that a user reads the result and finds the folder without
    searching the log. `record`: the run's metrics file, written as the run returns."""
    scored = [f"{k} {v:.4g}" for k, v in metrics.items()
              if k.startswith(scores) and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
    folder = Path(output_dir)
    ckpts = sorted(p.name for p in (folder / "checkpoints").glob("*.ckpt"))
    files = [record, *(p.name for p in sorted(folder.glob("*.log")) if p.name != "config_tree.log"),
             *(["samples.txt"] if (folder / "samples.txt").is_file() else []),
             *([f"checkpoints/ ({', '.join(ckpts)})"] if ckpts else []),
             *(f"{p.relative_to(folder).as_posix()}" for p in sorted(folder.glob("csv/**/metrics.csv")))]
    minutes, secs = divmod(round(seconds), 60)
    return (f"done in {minutes // 60}:{minutes % 60:02d}:{secs:02d}" + (f" · {', '.join(scored)}" if scored else "")
            + f" · in {folder}: {', '.join(files)}")


def _resume_from(cfg: DictConfig, trainer: L.Trainer) -> str | None:
    """The checkpoint fit starts from: `ckpt_path`, else this run directory's own `last.ckpt` (a job
    of the resumable launcher or a requeued SLURM job, back in its directory after a stop)."""
    ckpt_path = cfg.get("ckpt_path")
    if ckpt_path is None and cfg.get("resume_requeued", True):
        ckpt_path = requeued_checkpoint(trainer)
        if ckpt_path:
            log.info("resuming from %s: this job ran here before and was stopped", ckpt_path)
    return ckpt_path


def _keep_history(trainer: L.Trainer, ckpt_path: str | None) -> list[str]:
    """A run resumed in its own directory keeps its CSV history up to the checkpoint's step
    (`seqbench.training.csv_logger`); a checkpoint of another run (`ckpt_path=` elsewhere) starts a new one.
    Returns the log folders whose history is kept (Lightning's warning that it deletes them is false there)."""
    loggers = [lg for lg in trainer.loggers if isinstance(lg, CSVLogger)]
    if not ckpt_path or not loggers or not Path(ckpt_path).is_file():
        return []
    step, kept = None, []
    for logger in loggers:
        if Path(logger.save_dir).resolve() in Path(ckpt_path).resolve().parents:  # the run's own checkpoint
            if step is None:
                step = int(load_checkpoint(ckpt_path, "the checkpoint this run resumes", mmap=True)["global_step"])
            logger.resume_at(step)
            kept.append(logger.log_dir)
    return kept


def _device_name(trainer: L.Trainer, workers: int = 0) -> str:
    """What trained, as `seqbench.training.clocks.one_core` reads it: "cpu (x86_64, 1 threads) x1" is a run
    whose CPU seconds are its whole cost. DataLoader workers are other processes, outside this one's
    CPU clock, so a run that had them says so and is timed by the wall clock; so is any accelerator."""
    device = trainer.strategy.root_device
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} x{trainer.world_size}"
    import platform

    where = f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
    if workers:
        where += f", {workers} data workers"
    return f"{device.type} ({where}) x{trainer.world_size}"  # "mps (...)" is not a CPU


def _is_rank_zero() -> bool:
    from lightning.fabric.utilities.rank_zero import rank_zero_only

    return getattr(rank_zero_only, "rank", 0) == 0


def _finish_wandb() -> None:
    """Close the W&B run so the next job of a multirun starts a run of its own."""
    import sys

    if "wandb" in sys.modules:
        import wandb

        if wandb.run is not None:
            wandb.finish()
