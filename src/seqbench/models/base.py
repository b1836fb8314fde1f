"""What every family shares: the task's loss and metrics, optimisation, and reproducible resume.

A family subclasses `SeqModel`, builds its network in `__init__` from the data's `TaskSpec`, and
implements the method of each task it supports (`lm_logits`, ...). Everything else — optimizer and
LR schedule from config, the per-stage metrics, parameter counts, RNG state in checkpoints — is
here, once.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable

import lightning as L
import numpy as np
import torch
from torch import nn

from seqbench.checkpoints import to_plain
from seqbench.data.eval_shards import counted_rows
from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError
from seqbench.tasks import TASK_CLASSES, make_task


class SeqModel(L.LightningModule):
    #: "stream" (truncated BPTT, state carried) or "windows" (fixed context): how an LM DataModule
    #: should batch a corpus for this family
    lm_batching = "stream"
    #: whether its decoding keeps a key/value cache (`seqbench.nn.kv_cache`): the families
    #: `seqbench.analysis.decode_bench` times with and without it
    kv_cache = False

    def __init__(self, spec: TaskSpec, optimizer: Callable, scheduler: Callable | None = None,
                 scheduler_interval: str = "epoch", scheduler_monitor: str | None = None) -> None:
        super().__init__()
        if spec.task not in self.supported_tasks():
            raise ConfigError(
                f"{type(self).__name__} does not support the task {spec.task!r}; it supports "
                f"{', '.join(self.supported_tasks()) or 'nothing'}."
            )
        self.spec = spec
        self.task = make_task(spec)
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self.scheduler_interval, self.scheduler_monitor = scheduler_interval, scheduler_monitor

    @classmethod
    def supported_tasks(cls) -> tuple[str, ...]:
        """A family supports a task exactly when it implements the task's method."""
        return tuple(name for name, task in TASK_CLASSES.items() if callable(getattr(cls, task.method, None)))

    # -- steps: the task owns the loss and the metrics ------------------------------------------
    def training_step(self, batch, batch_idx: int):
        return self.task.step(self, batch, "train")

    def validation_step(self, batch, batch_idx: int):
        batch = counted_rows(batch)  # under DDP: each example scored once (seqbench.data.eval_shards)
        if batch is not None:
            self.task.step(self, batch, "val")

    def test_step(self, batch, batch_idx: int):
        batch = counted_rows(batch)
        if batch is not None:
            self.task.step(self, batch, "test")

    def on_train_epoch_end(self) -> None:
        self.task.epoch_end(self, "train")

    def on_validation_epoch_end(self) -> None:
        if self.trainer.sanity_checking:  # the sanity pass must not leak into epoch 0's numbers
            self.task.reset("val")
        else:
            self.task.epoch_end(self, "val")

    def on_test_epoch_end(self) -> None:
        self.task.epoch_end(self, "test")

    # -- sizes ------------------------------------------------------------------------------------
    def num_params(self, non_embedding: bool = False) -> int:
        """Unique trainable parameters; `non_embedding` leaves out token/position embedding tables."""
        params = {id(p): p for p in self.parameters() if p.requires_grad}
        if non_embedding:
            for module in self.modules():
                if isinstance(module, nn.Embedding):
                    params.pop(id(module.weight), None)
        return sum(p.numel() for p in params.values())

    def flops_per_token(self, length: int | None = None) -> float | None:
        """Training FLOPs (forward + backward) per target token on sequences of `length`, or None where
        the family does not count them (only language models do; formulas in `seqbench.nn.flops`)."""
        return None

    # -- optimisation -----------------------------------------------------------------------------
    def param_groups(self, weight_decay: float) -> list[dict]:
        """Decay matrices only: biases, norms and gains are not regularised (as in GPT-2, nanoGPT)."""
        params = [p for p in self.parameters() if p.requires_grad]
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]

    def configure_optimizers(self):
        weight_decay = getattr(self.optimizer_factory, "keywords", {}).get("weight_decay", 0.0)
        params = self.param_groups(weight_decay) if weight_decay else self.parameters()
        optimizer = self.optimizer_factory(params=params)
        if self.scheduler_factory is None:
            return optimizer
        kwargs = {}
        given = getattr(self.scheduler_factory, "keywords", {})
        if "total_steps" in inspect.signature(self.scheduler_factory).parameters and given.get("total_steps") is None:
            kwargs["total_steps"] = int(self.trainer.estimated_stepping_batches)
        scheduler = {"scheduler": self.scheduler_factory(optimizer=optimizer, **kwargs),
                     "interval": self.scheduler_interval, "name": "lr"}
        if self.scheduler_monitor:
            scheduler["monitor"] = self.scheduler_monitor
        return {"optimizer": optimizer, "lr_scheduler": scheduler}

    # -- exact resume: the RNG streams (dropout masks) continue where they stopped -------------
    # Stored as tensors and plain Python values only, as is everything else beside the weights
    # (hyperparameters from Hydra may arrive as OmegaConf lists): checkpoints load with torch.load's
    # safe `weights_only=True`, the only way seqbench reads them (seqbench.checkpoints).
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        if "hyper_parameters" in checkpoint:
            checkpoint["hyper_parameters"] = to_plain(dict(checkpoint["hyper_parameters"]), "hyper_parameters")
            checkpoint.pop("hparams_type", None)
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        checkpoint["rng"] = {
            "torch": torch.get_rng_state(),
            "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached],
            "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        rng = checkpoint.get("rng")
        if not rng:
            return
        torch.set_rng_state(rng["torch"])
        kind, keys, pos, has_gauss, cached = rng["numpy"]
        np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
        random.setstate(rng["python"])
        if rng.get("cuda") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
