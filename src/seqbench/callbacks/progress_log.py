"""One plain log line per validation, so a run reads the same in a file as in a terminal.

Rich's progress bar redraws one terminal line; written to a file (`> log`, `nohup`, a SLURM job) it
leaves nothing useful, and a 12-minute run shows only its model summary. This callback writes, after
every validation, a line through Python logging (Hydra sends it to the console and to the run's
`train.log`):

    epoch 2 · step 1,240/4,650 · val/ppl 142.31 (best 140.20) · lr 5 · 6,120 tokens/s · 3:12 elapsed · ETA 8:45

The ETA is the elapsed time scaled by the steps still to go (`trainer.estimated_stepping_batches`,
so `max_steps`, `max_epochs` and `limit_train_batches` all count), capped by `trainer.max_time`.
A resumed run counts from its resumption: the clock and the step count start at `on_train_start`,
which Lightning calls after it restored the checkpoint's loop state (at `on_fit_start` the global step
is still 0, and a run resumed at step 3,900 of 4,000 would promise to end in a few seconds).
"""

from __future__ import annotations

import logging
import math
import time

import lightning as L

log = logging.getLogger("seqbench")


def clock(seconds: float) -> str:
    """3:12 or 1:02:03."""
    if not math.isfinite(seconds):
        return "?"
    minutes, secs = divmod(int(max(seconds, 0)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class ProgressLog(L.Callback):
    def __init__(self) -> None:
        self._start: float | None = None
        self._start_step = 0

    def on_train_start(self, trainer, pl_module) -> None:
        self._start, self._start_step = time.perf_counter(), trainer.global_step

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or self._start is None or not trainer.is_global_zero:
            return
        log.info(self.line(trainer))

    def line(self, trainer) -> str:
        elapsed = time.perf_counter() - self._start
        step, total = trainer.global_step, trainer.estimated_stepping_batches
        parts = [f"epoch {trainer.current_epoch}",
                 f"step {step:,}/{total:,}" if math.isfinite(total) else f"step {step:,}"]
        ckpt = trainer.checkpoint_callback
        monitor = getattr(ckpt, "monitor", None) or "val/loss"
        metrics = trainer.callback_metrics
        value = metrics.get(monitor)
        if value is not None:
            # the checkpoint callback runs after this one: its best does not hold this validation yet
            best = float(value)
            if getattr(ckpt, "best_model_score", None) is not None:
                pick = min if getattr(ckpt, "mode", "min") == "min" else max
                best = pick(best, float(ckpt.best_model_score))
            parts.append(f"{monitor} {float(value):.4g} (best {best:.4g})")
        if monitor != "val/ppl" and metrics.get("val/ppl") is not None:
            parts.append(f"val/ppl {float(metrics['val/ppl']):.4g}")
        if trainer.optimizers:
            parts.append(f"lr {trainer.optimizers[0].param_groups[0]['lr']:.3g}")
        tokens_per_s = _tokens_per_s(trainer)
        if tokens_per_s:
            parts.append(f"{tokens_per_s:,.0f} tokens/s")
        parts.append(f"{clock(elapsed)} elapsed")
        done = step - self._start_step
        eta = elapsed * (total - step) / done if done > 0 and math.isfinite(total) else math.inf
        limit = _max_time_s(trainer)
        if limit is not None:
            eta = min(eta, limit - elapsed)
        parts.append(f"ETA {clock(eta)}")
        return " · ".join(parts)


def _tokens_per_s(trainer) -> float | None:
    from seqbench.callbacks.learning_curve import LearningCurve

    curve = next((c for c in trainer.callbacks if isinstance(c, LearningCurve)), None)
    if curve is None or curve.train_time_s <= 0:
        return None
    return curve.tokens / curve.train_time_s


def _max_time_s(trainer) -> float | None:
    from lightning.pytorch.callbacks import Timer

    timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
    duration = getattr(timer, "_duration", None)
    return duration if duration else None
