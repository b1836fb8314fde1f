"""Where each validation falls on the axes a comparison needs: training tokens and training time.

Validation perplexity against epochs compares badly across families: an epoch costs an LSTM and a
Transformer very different time. At every validation this callback logs how many training target
tokens the model has been trained on so far (`curve/tokens`, all processes together), the seconds
spent in training steps (`curve/train_time_s`: validation, checkpointing and start-up excluded, the
GPU synchronised around each step), the CPU seconds the process spent in those steps
(`curve/train_cpu_s`) and the wall-clock seconds since fit started (`curve/wall_time_s`).

Why a CPU clock beside the wall clock: on a shared CPU machine a step's wall time holds whatever else
ran on its core — another sweep's job, a test suite, a pause (SIGSTOP) of the whole chain — and the
long tuning chains run on exactly such machines. The process's CPU seconds count only its own work
(all its threads: core-seconds), so a CPU run's cost is measured even where its wall time is not. It is
rank 0's process alone: other DDP ranks and DataLoader worker processes are not in it (the chains run
one process, no workers). On a GPU it counts only the host's share and says little; the wall clock is
the measure there.
For a language model it also logs the cumulative training FLOPs (`train/flops`): each batch's target
tokens times the family's FLOPs per token at that batch's length (`flops_per_token`, the formulas of
`seqbench.nn.flops`: matmuls, forward + backward). They land in the same CSV row as `val/ppl`, which is what `seqbench.reports.report` plots and reads the
"time to a target perplexity" from. The counters are saved in checkpoints, so a resumed run's curve
continues where it stopped.
"""

from __future__ import annotations

import time

import lightning as L
import torch


class LearningCurve(L.Callback):
    def __init__(self) -> None:
        self.tokens = 0
        self.flops = 0.0
        self.counts_flops = False  # whether the model has a FLOPs formula (language models)
        self.train_time_s = 0.0
        self.train_cpu_s = 0.0  # process CPU seconds in training steps (the module docstring says why)
        self.wall_offset_s = 0.0  # wall time of the runs this one resumes
        self._fit_start: float | None = None
        self._t0: float | None = None
        self._c0: float | None = None

    def on_fit_start(self, trainer, pl_module) -> None:
        self._fit_start = time.perf_counter()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._sync(pl_module)
        self._t0, self._c0 = time.perf_counter(), time.process_time()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._sync(pl_module)
        if self._t0 is not None:
            self.train_time_s += time.perf_counter() - self._t0
            self.train_cpu_s += time.process_time() - self._c0
        tokens = pl_module.task.count_tokens(batch) * trainer.world_size
        self.tokens += tokens
        per_token = pl_module.flops_per_token(_length(batch))
        if per_token is not None:
            self.counts_flops = True
            self.flops += tokens * per_token

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or self._fit_start is None:
            return
        pl_module.log_dict({"curve/tokens": float(self.tokens), "curve/train_time_s": self.train_time_s,
                            "curve/train_cpu_s": self.train_cpu_s, "curve/wall_time_s": self.wall_time_s(), **self.summary()}, rank_zero_only=True)

    def summary(self) -> dict[str, float]:
        """The cumulative training FLOPs, for the history and the run's record (none where not counted)."""
        return {"train/flops": float(self.flops)} if self.counts_flops else {}

    def wall_time_s(self) -> float:
        return self.wall_offset_s + (time.perf_counter() - self._fit_start if self._fit_start else 0.0)

    @staticmethod
    def _sync(pl_module) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)

    def state_dict(self) -> dict:
        return {"tokens": self.tokens, "train_time_s": self.train_time_s, "train_cpu_s": self.train_cpu_s,
                "wall_time_s": self.wall_time_s(),
                "flops": self.flops, "counts_flops": self.counts_flops}

    def load_state_dict(self, state_dict: dict) -> None:
        self.tokens = int(state_dict.get("tokens", 0))
        self.train_time_s = float(state_dict.get("train_time_s", 0.0))
        self.train_cpu_s = float(state_dict.get("train_cpu_s", 0.0))  # 0 from a checkpoint written before it
        self.flops = float(state_dict.get("flops", 0.0))
        self.counts_flops = bool(state_dict.get("counts_flops", False))
        self.wall_offset_s = float(state_dict.get("wall_time_s", 0.0))


def _length(batch) -> int | None:
    """The time length of a batch of token ids (B, T), which an attention model's FLOPs depend on."""
    x = batch.get("input") if isinstance(batch, dict) else None
    return x.size(1) if isinstance(x, torch.Tensor) and x.dim() >= 2 else None
