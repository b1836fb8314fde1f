"""Sweep directories read as runs, read again only once one of their jobs has finished.

The campaign's dry run computes each later step from the same search and transfer checks several times
over (the seeds' readiness computes the sizes' sweeps, which read both), and one read of a few hundred
runs with their curves takes a minute on a loaded machine: before this cache a PTB cost report took
over 16 minutes. A read kept after a job finished would be as wrong as a slow one (the next step would
come from runs that are no longer all there are), so the key is what a finished job changes (`stamp`).
"""

from __future__ import annotations

from pathlib import Path

from seqbench.training import record
from seqbench.training.hydra_callbacks import JOBS


def stamp(sweep: Path) -> tuple:
    """What changes when a sweep's job starts or ends: its jobs' records (how many, the latest write,
    `seqbench.training.record.written`) and the launcher's record of outcomes."""
    jobs = sweep / JOBS
    return (*record.written(sweep), jobs.stat().st_mtime_ns if jobs.is_file() else 0)


class SweepReads:
    """`seqbench.training.record.read_runs(dirs)`, cached under the directories' stamps."""

    def __init__(self):
        self._cache: dict[tuple, list] = {}

    def __call__(self, dirs: list[Path]) -> list:
        key = tuple((str(d), stamp(d)) for d in dirs)
        if key not in self._cache:
            self._cache[key] = record.read_runs(dirs)  # looked up at call time, so a test may count the reads
        return self._cache[key]
