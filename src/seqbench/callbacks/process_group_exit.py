"""Destroy the process group when a distributed process exits, so that exiting cannot abort it.

torch leaves a gloo process group that nobody destroyed to the interpreter's finalization, and there
its worker threads are torn down in an order that sometimes ends the process with "terminate called
without an active exception" (SIGABRT). A `trainer.strategy=ddp_spawn` run starts fresh workers for
fit and again for test, and each one exits this way; when one aborts, torch's spawn kills the others
and the job fails after its training finished. Measured with `scripts/process_group_exit.py` on
torch 2.13 (CPU, 2-core AMD EPYC, 2026-12-06): two spawned gloo ranks that all-reduce and return fail
in 18 of 90 spawns (3 of 30 alone, 15 of 60 beside two training jobs); destroying the group first, in
0 of 120 (60 at the end of the worker, 60 in an `atexit` handler). Lightning registers that
handler for NCCL only (`lightning.fabric.utilities.distributed._init_dist_connection`); this callback
registers it for any backend, in every process the trainer runs in: `ddp_spawn`'s workers, `ddp`'s
launched ranks and rank zero. It is part of every trainer seqbench builds (`seqbench.training.run.make_trainer`,
`seqbench.training.evaluate`), not of the `callbacks` config a user may edit.
"""

from __future__ import annotations

import atexit

import lightning as L
import torch.distributed as dist


def destroy_process_group() -> None:
    """Destroy the default process group if this process has one; a no-op otherwise (idempotent)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


class DestroyProcessGroupAtExit(L.Callback):
    """In `setup`, after the strategy has set up the process group: destroy it when the process exits."""

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if dist.is_available() and dist.is_initialized():
            atexit.unregister(destroy_process_group)  # once per process however many stages run in it
            atexit.register(destroy_process_group)
