"""Hydra callbacks: a multirun reports every job's outcome, so a failed job hides nothing.

Hydra's basic sweeper runs every job of a sweep and only then re-raises the first failure. This
callback prints each job's outcome as it ends and appends it to `<sweep dir>/jobs.jsonl`, so every
failure (not just the first) is visible, and `seqbench.reports.report` can list them beside the results.
`last_outcomes` reads that file back, for everything that asks how a sweep's jobs ended (the report,
the tuning record, the campaign's relaunches).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode

log = logging.getLogger("seqbench")
JOBS = "jobs.jsonl"  # in the sweep directory: one line per job outcome, appended as each job ends


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
        append_outcome(sweep_dir, record)
        if failed:
            log.error("job %s (%s) FAILED: %s — the other jobs go on; see %s/%s",
                      record["job"], record["overrides"], record["error"], sweep_dir, JOBS)


def append_outcome(sweep_dir: Path, record: dict) -> None:
    """One record, one line, appended to `<sweep dir>/jobs.jsonl` (`append_line`)."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    append_line(sweep_dir / JOBS, record)


def append_line(path: Path, record: dict) -> None:
    """One JSON record as one line at the end of `path`. A process killed while writing one leaves a
    torn line with no newline; the next record starts a fresh line, so the tear costs only its own
    record, not the one after it too."""
    with open(path, "ab+") as f:
        end = f.seek(0, os.SEEK_END)
        f.seek(max(end - 1, 0))
        torn = end > 0 and f.read(1) != b"\n"
        f.write(b"\n" * torn + (json.dumps(record) + "\n").encode())


def last_outcomes(sweep_dir: Path) -> dict[int, dict]:
    """Job number -> its last record in `<sweep dir>/jobs.jsonl` (none: no file). A relaunched sweep
    (the resumable launcher runs again what failed) records a job once per launch, and the last record
    is how it stands: a job that failed and then completed reads as completed. A line that is not a
    whole record was torn by a process killed while writing it: skipped, with a warning (that outcome
    was never written whole; the job's record, where it wrote one, still says how it ended)."""
    path = Path(sweep_dir) / JOBS
    last: dict[int, dict] = {}
    for number, line in enumerate(path.read_text().splitlines() if path.is_file() else [], start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            log.warning("%s, line %d: not a whole record (torn by a killed process); skipped", path, number)
            continue
        last[int(record["job"])] = record
    return last
