"""Training speed and memory, measured the way the comparison tables need them.

Lightning's `ThroughputMonitor` reports a sliding window per step and synchronises the GPU every
step; the tables need run totals instead. A batch is timed from the end of the previous batch to
its own end, so everything the training loop spends per batch counts — fetching the batch, the
step, every callback and logger, the progress bar — and nothing else: intervals that contain a
validation pass or an epoch boundary are left out, and so are the first `warmup_steps` batches
(allocator warm-up, first-call dispatch). Logged as `train/tokens_per_s`, `train/ms_per_batch` and
`peak_mem_mb`, and kept on the callback for the run's record.
"""

from __future__ import annotations

import resource
import sys
import time

import lightning as L
import torch


def reset_peak_memory(device: torch.device) -> None:
    """Start a new peak. On Linux CPUs this resets the kernel's RSS high-water mark (VmHWM); without
    it, the jobs of a multirun (one process) would each report the largest peak of all before them."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:  # not Linux, or not allowed: the peak then covers the whole process
        pass


def peak_memory_mb(device: torch.device) -> float:
    """Peak GPU memory allocated by tensors, or the process' peak resident set size on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    try:
        with open("/proc/self/status") as f:
            hwm = next(line for line in f if line.startswith("VmHWM:"))
        return int(hwm.split()[1]) / 2**10  # kB
    except (OSError, StopIteration):
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return rss / 2**20 if sys.platform == "darwin" else rss / 2**10  # bytes on macOS, KiB on Linux


class RunStats(L.Callback):
    def __init__(self, warmup_steps: int = 5) -> None:
        self.warmup_steps = warmup_steps
        self.tokens = 0
        self.train_seconds = 0.0
        self.batches = 0
        self.fit_start: float | None = None
        self.wall_time_s = 0.0
        self._last_end: float | None = None
        self._seen = 0

    def on_fit_start(self, trainer, pl_module) -> None:
        self.fit_start = time.perf_counter()

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self._last_end = None  # the interval across an epoch boundary holds validation and checkpoints

    def on_validation_start(self, trainer, pl_module) -> None:
        self._last_end = None  # likewise for validation in the middle of an epoch

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._sync(pl_module)
        now = time.perf_counter()
        self._seen += 1
        if self._last_end is not None and self._seen > self.warmup_steps:
            self.train_seconds += now - self._last_end
            self.tokens += pl_module.task.count_tokens(batch) * trainer.world_size
            self.batches += 1
        self._last_end = now

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if self.train_seconds > 0:
            pl_module.log_dict(self.summary(pl_module, include_wall=False), rank_zero_only=True)

    def on_fit_end(self, trainer, pl_module) -> None:
        if self.fit_start is not None:
            self.wall_time_s = time.perf_counter() - self.fit_start

    def setup(self, trainer, pl_module, stage: str) -> None:
        if stage == "fit":  # each job of a multirun (one process) gets a peak of its own
            reset_peak_memory(trainer.strategy.root_device)

    @staticmethod
    def _sync(pl_module) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)

    def summary(self, pl_module, include_wall: bool = True) -> dict[str, float]:
        out = {
            "train/tokens_per_s": self.tokens / self.train_seconds if self.train_seconds else float("nan"),
            "train/ms_per_batch": 1000 * self.train_seconds / self.batches if self.batches else float("nan"),
            "peak_mem_mb": peak_memory_mb(pl_module.device),
        }
        if include_wall:
            out["fit_time_s"] = self.wall_time_s
        return out
