"""Lightning's CSVLogger, able to append to a `metrics.csv` that another process started.

Lightning's CSV writer learns the file's columns only from what it logged itself, and rewrites the
file whenever it meets a new column. A writer created in a fresh process over an existing file —
the test stage of `trainer.strategy=ddp_spawn`, which runs in new worker processes after fit's
workers wrote the training history — knows none of the file's columns, so its first rewrite fails
("dict contains fields not in fieldnames") or would drop them. This subclass starts the writer from
the existing header, so the history is kept and the new columns are added beside it.
"""

from __future__ import annotations

import csv
import os

from lightning.pytorch.loggers import CSVLogger as LightningCSVLogger


class CSVLogger(LightningCSVLogger):
    @property
    def experiment(self):
        experiment = super().experiment
        path = getattr(experiment, "metrics_file_path", None)  # ranks other than 0 get a dummy
        if path and not experiment.metrics_keys and os.path.isfile(path):
            with open(path, newline="") as f:
                experiment.metrics_keys = sorted(next(csv.reader(f), []))
        return experiment
