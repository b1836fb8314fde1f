"""Lightning's CSVLogger, able to continue a `metrics.csv` that another process started.

Lightning's CSV writer deletes an existing `metrics.csv` when it is created in a directory that holds
one (`_ExperimentWriter._check_log_dir_exists`), and learns the file's columns only from what it
logged itself. Two cases here need the file kept:

- **A resumed run** (the resumable launcher and a requeued job resume in their own directory, from
  `last.ckpt`): deleting the file lost every validation before the stop, so the learning curve, the
  frontier's points and the report's best validation perplexity came from the last segment alone (a
  run resumed after its training had ended kept none). `resume_at(step)` keeps the rows logged up to
  the checkpoint's step; later rows were logged by steps the resumed run repeats, and go.
- **A writer created in a fresh process over the file** — the test stage of `trainer.strategy=ddp_spawn`,
  which runs in new worker processes after fit's workers wrote the history: its first rewrite failed
  ("dict contains fields not in fieldnames") or would drop the columns it did not know.

In both the writer starts from the existing header, so the history is kept and new columns are added
beside it.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from lightning.pytorch.loggers import CSVLogger as LightningCSVLogger


class CSVLogger(LightningCSVLogger):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._resumed_at: int | None = None

    def resume_at(self, step: int) -> None:
        """Keep the history of the run this one resumes, up to `step` (its checkpoint's global step).
        Call before anything is logged: the writer is created, and the old file read, on first use."""
        self._resumed_at = step

    @property
    def experiment(self):
        kept = None
        if self._experiment is None and self._resumed_at is not None:
            kept = _rows_up_to(Path(self.log_dir) / "metrics.csv", self._resumed_at)  # before the writer deletes it
        experiment = super().experiment
        path = getattr(experiment, "metrics_file_path", None)  # ranks other than 0 get a dummy
        if path and kept is not None:
            header, rows = kept
            with open(path, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=header)
                writer.writeheader()
                writer.writerows(rows)
            experiment.metrics_keys = sorted(header)
        elif path and not experiment.metrics_keys and os.path.isfile(path):
            with open(path, newline="") as f:
                experiment.metrics_keys = sorted(next(csv.reader(f), []))
        return experiment


def _rows_up_to(path: Path, step: int) -> tuple[list[str], list[dict]] | None:
    """The file's header and its rows logged at or before `step`; None where there is no file."""
    if not path.is_file():
        return None
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = [row for row in reader if _step(row) <= step]
        return list(reader.fieldnames or []), rows


def _step(row: dict) -> float:
    try:
        return float(row.get("step") or 0)
    except ValueError:
        return 0.0
