"""The launcher's `jobs.jsonl`: written by `JobSummary` as each job of a multirun ends, read back by
`last_outcomes` for the report, the tuning record and the campaign's relaunches."""

from __future__ import annotations

from types import SimpleNamespace

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.types import RunMode

from seqbench.training.hydra_callbacks import JOBS, JobSummary, last_outcomes


def _end(monkeypatch, sweep, num, error=None):
    """Job `num` of the multirun in `sweep` ends (failed with `error`, else completed), as Hydra tells
    the callback."""
    fake = SimpleNamespace(mode=RunMode.MULTIRUN, job=SimpleNamespace(num=num), sweep=SimpleNamespace(dir=str(sweep)),
                           runtime=SimpleNamespace(output_dir=str(sweep / str(num))))
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: fake))
    ret = JobReturn(overrides=[f"seed={num}"], status=JobStatus.FAILED if error else JobStatus.COMPLETED)
    ret._return_value = error
    JobSummary().on_job_end(None, ret)


def test_each_job_reads_as_its_last_outcome_and_a_torn_line_costs_only_its_own_record(tmp_path, monkeypatch):
    sweep = tmp_path / "sweep"
    _end(monkeypatch, sweep, 0, RuntimeError("killed for memory"))
    _end(monkeypatch, sweep, 1)
    _end(monkeypatch, sweep, 0)  # the relaunch resumed it
    # bug caught: a job's first record read (a job that failed, then completed on resume, still failed)
    assert {job: r["status"] for job, r in last_outcomes(sweep).items()} == {0: "completed", 1: "completed"}
    assert last_outcomes(sweep)[1] == {"job": 1, "overrides": "seed=1", "status": "completed",
                                       "dir": str(sweep / "1"), "error": None}

    with open(sweep / JOBS, "a") as f:  # a process killed while writing job 2's record
        f.write('{"job": 2, "overrides": "seed=2", "sta')
    # bug caught: the torn line raised (every reader of the sweep stopped: the report, the campaign)
    assert sorted(last_outcomes(sweep)) == [0, 1]

    _end(monkeypatch, sweep, 2, RuntimeError("no space left"))  # the next launch's record of it
    # bug caught: the next record appended to the torn line, and the two lost together
    assert last_outcomes(sweep)[2]["error"] == "RuntimeError: no space left"
    assert sorted(last_outcomes(sweep)) == [0, 1, 2]
