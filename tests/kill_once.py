"""A callback that kills its own process once, at a given step of a given sweep job: a session stop
in the middle of a long sweep, for tests/test_resumable_sweep.py (not part of the package)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import lightning as L


class KillOnce(L.Callback):
    def __init__(self, step: int, marker: str, job_num: int, only_job: int) -> None:
        self.step, self.marker, self.armed = step, Path(marker), job_num == only_job

    def on_train_batch_end(self, trainer, *args) -> None:
        if self.armed and trainer.global_step == self.step and not self.marker.exists():
            self.marker.write_text(f"killed at step {self.step}\n")
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no metrics.json: as a session stop leaves it
