"""Hydra callbacks: a multirun reports every job's outcome, so a failed job hides nothing.

Hydra's basic sweeper runs every job of a sweep and only then re-raises the first failure. This
callback prints each job's outcome as it ends and appends it to `<sweep dir>/jobs.jsonl`, so every
failure (not just the first) is visible, and `seqbench.report` can list them beside the results.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode

log = logging.getLogger("seqbench")


class JobSummary(Callback):
    def on_job_end(self, config, job_return: JobReturn, **kwargs: Any) -> None:
        hc = HydraConfig.get()
        if hc.mode != RunMode.MULTIRUN:
            return
        failed = job_return.status == JobStatus.FAILED
        error = job_return._return_value if failed else None
        record = {
            "job": hc.job.num,
            "overrides": " ".join(job_return.overrides or []),
            "status": "failed" if failed else "completed",
            "dir": hc.runtime.output_dir,
            "error": f"{type(error).__name__}: {error}" if failed else None,
        }
        sweep_dir = Path(hc.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        with open(sweep_dir / "jobs.jsonl", "a") as f:
            f.write(json.dumps(record) + "\n")
        if failed:
            log.error("job %s (%s) FAILED: %s — the other jobs go on; see %s/jobs.jsonl",
                      record["job"], record["overrides"], record["error"], sweep_dir)
