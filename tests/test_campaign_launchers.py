"""The campaign on any Hydra launcher (`python -m seqbench.protocol.campaign ... -- hydra/launcher=<name>`):
the resumable pool stays the default; submitit's local executor runs a tiny two-step chain, a job killed in
the middle of it resumed by the next launch; a job archived under one launcher is restored under another;
and `submitit_slurm` composes with the chain's sweeps (a cluster is not here to run them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from hydra.utils import get_class

from conftest import ROOT, compose_raw
from seqbench.protocol.campaign import sweep_words
from seqbench.protocol.chain import DONE, Chain
from seqbench.protocol.sweep_archive import Archive, ArchiveCallback

# A two-step chain small enough for the suite: the PTB protocol's search and untuned steps, cut down on the
# command line after `--` (which every step of the chain takes) to the LSTM at 16 units, two rates, a few
# steps: two jobs a step.
TINY = ["preset=frontier/ptb/lstm", "size=xxs", "budget.flops=3e9", "tune.lr_scale=1,2", "tune.tokens_per_step=280",
        "trainer.limit_val_batches=2"]


def _campaign(args: list[str], tmp_path, extra: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "seqbench.protocol.campaign", *args, "--", *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def _metrics(job) -> dict:
    path = job / "metrics.json"
    return json.loads(path.read_text()) if path.is_file() else {}


@pytest.mark.slow
@pytest.mark.corpus("ptb")
def test_a_tiny_chain_runs_under_submitit_a_killed_job_resumes_and_the_archive_serves_the_pool(tmp_path):
    # bugs caught: the campaign writing `hydra/launcher=resumable` (or the pool's `hydra.launcher.jobs`) into
    # a sweep the user gave another launcher; a job a launcher lost (killed: no outcome in jobs.jsonl) read as
    # "no job failed", stopping the chain instead of launching the sweep again; a relaunched job that
    # finished before trained again (only the pool skipped it); the killed job starting over rather than
    # resuming from its last.ckpt; a job under another launcher left out of the archive, or its key not the
    # one the pool looks up
    marker, archive = tmp_path / "killed", tmp_path / "archive"
    common = [*TINY, "logger=csv", "trainer=cpu", f"paths.log_dir={tmp_path}",
              "~callbacks.model_summary", "~callbacks.progress_bar", "callbacks.step_checkpoint.every_n_train_steps=2",
              # job 1 of the search dies at step 3, once, as a session stop leaves it: last.ckpt of step 2, no outcome
              "+callbacks.kill._target_=kill_once.KillOnce", "+callbacks.kill.step=3", f"+callbacks.kill.marker={marker}",
              "+callbacks.kill.job_num=${hydra:job.num}", "+callbacks.kill.only_job=1"]
    root = tmp_path / "sweeps"
    steps = ["tune_frontier_ptb", "--root", str(root), "--steps", "search,untuned", "--archive", str(archive)]
    ran = _campaign(steps, tmp_path, ["hydra/launcher=submitit_local", "hydra.launcher.timeout_min=20", *common])
    log = ran.stdout + ran.stderr
    assert ran.returncode == 0, log[-4000:]
    search, untuned = root / "tune_frontier_ptb", root / "tune_frontier_ptb_untuned"
    assert marker.is_file() and "(launch 2 of 3)" in log, log[-4000:]  # killed once, then launched again
    assert "hydra/launcher=resumable" not in log and "hydra.launcher.jobs" not in log
    assert (search / DONE).is_file() and (untuned / DONE).is_file()
    assert [_metrics(search / str(j)).get("status") for j in (0, 1)] == ["completed", "completed"]
    assert "not trained again" in (search / "0" / "train.log").read_text()  # finished at the first launch
    assert "resuming from" in (search / "1" / "train.log").read_text()
    resumed = torch.load(search / "1" / "checkpoints" / "last.ckpt", weights_only=False)["global_step"]
    assert resumed == _metrics(search / "1")["budget/max_steps"] > 2  # on to its budget's end from step 2
    assert len(Archive(archive, search.name).entries()) == 2 and len(Archive(archive, untuned.name).entries()) == 2

    again = _campaign(steps, tmp_path, ["hydra/launcher=submitit_local", *common])
    assert again.returncode == 0 and again.stdout.count("done before") == 2, (again.stdout + again.stderr)[-3000:]

    # the outputs lost (a session stop): the pool, the default launcher, restores every job from what the
    # submitit jobs archived, and trains none
    fresh = tmp_path / "fresh"
    restored = _campaign(["tune_frontier_ptb", "--root", str(fresh), "--steps", "search,untuned", "--archive", str(archive),
                          "--jobs", "1"], tmp_path, common)
    assert restored.returncode == 0, (restored.stdout + restored.stderr)[-4000:]
    for sweep, jobs in ((search.name, 2), (untuned.name, 2)):
        launcher_log = (fresh / sweep / "launcher.log").read_text()
        assert f"Launching 0 of {jobs} jobs" in launcher_log, launcher_log[-3000:]
        assert all(_metrics(fresh / sweep / str(j)).get("restored_from") == str(archive / f"{sweep}.jsonl")
                   for j in range(jobs))


def test_the_chain_composes_with_submitit_slurm_and_keeps_the_pool_by_default(tmp_path):
    # bugs caught: the pool's settings (`hydra.launcher.jobs`, `hydra.launcher.archive`, a step's
    # `hydra.launcher.archive_from`) given to a launcher that has none of them, so a SLURM campaign fails to
    # compose; the archive not kept on SLURM (no callback); the default launcher no longer the pool
    archive = tmp_path / "archive"
    (name, overrides), = Chain("tune_frontier_ptb", tmp_path).search()
    overrides = [*overrides, "hydra.launcher.archive_from=[frontier_ptb_tuned_sizes]"]  # as a tier's size sweep has
    pool = sweep_words(tmp_path / name, 2, overrides, ["logger=csv"], archive)
    assert pool[:4] == ["-m", "hydra/launcher=resumable", f"hydra.sweep.dir={tmp_path / name}", "hydra.launcher.jobs=2"]
    assert f"hydra.launcher.archive={archive.resolve()}" in pool

    words = sweep_words(tmp_path / name, 2, overrides, ["hydra/launcher=slurm", "hydra.launcher.partition=gpu",
                                                        "logger=csv"], archive)
    assert words[0] == "-m" and not any(w.startswith(("hydra.launcher.jobs", "hydra.launcher.archive", "hydra/launcher=resumable"))
                                        for w in words)
    cfg = compose_raw(words[1:], tmp_path)
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert launcher.partition == "gpu" and launcher.tasks_per_node == launcher.gpus_per_node  # conf/hydra/launcher/slurm.yaml
    get_class(launcher._target_)  # the plugin is installed (a dependency)
    callback = cfg.hydra.callbacks.archive
    assert get_class(callback._target_) is ArchiveCallback
    assert callback.directory == str(archive.resolve()) and list(callback.archive_from) == ["frontier_ptb_tuned_sizes"]
    assert cfg.hydra.sweep.dir == str(tmp_path / name)


def test_a_job_a_launcher_lost_is_a_failed_job(tmp_path):
    # bugs caught: a job killed under submitit (its record says `running`, and no outcome reached jobs.jsonl)
    # read as nothing failed, so the campaign stops the chain instead of launching the sweep again; a job
    # that completed, or one whose outcome is recorded, counted twice
    from seqbench.protocol.campaign import failed_jobs
    from seqbench.training.hydra_callbacks import append_outcome
    from seqbench.training.record import write_metrics

    sweep = tmp_path / "s"
    for job, status in ((0, "completed"), (1, "running"), (2, "failed")):
        write_metrics(sweep / str(job) / "metrics.json", {"status": status})
    append_outcome(sweep, {"job": 0, "status": "completed"})
    append_outcome(sweep, {"job": 2, "status": "failed"})
    assert failed_jobs(sweep) == [1, 2]


def test_a_job_under_another_launcher_restores_itself_from_the_archive_and_archives_itself(tmp_path):
    # bugs caught: under a launcher other than the pool, an archived job trained again (no restore as it
    # starts), or a finished job left out of the archive; a job restored from another sweep's entry
    # where its own sweep has one (the pool's order: its own wins); a job that finished before restored over
    from hydra.core.utils import JobReturn, JobStatus
    from omegaconf import open_dict, read_write

    from seqbench.protocol.sweep_archive import job_key
    from seqbench.training.record import completed, read_metrics, write_metrics
    from seqbench.training.run import finished_before

    sweep = tmp_path / "tune_x"
    config = compose_raw(["experiment=tune_frontier_ptb", "preset=frontier/ptb/lstm", "tune.lr_scale=2",
                          "tune.tokens_per_step=512", "logger=csv"], tmp_path)
    with read_write(config.hydra), open_dict(config.hydra):
        config.hydra.sweep.dir = str(sweep)
        config.hydra.runtime.output_dir = str(sweep / "0")
        config.hydra.overrides.task = ["preset=frontier/ptb/lstm", "tune.lr_scale=2", "tune.tokens_per_step=512"]
    archive = tmp_path / "archive"
    key = job_key(config)
    Archive(archive, "other_sizes").append(key, "3", {"status": "completed", "val/loss_best": 5.0})
    Archive(archive, "tune_x").append(key, "0", {"status": "completed", "val/loss_best": 4.0})
    callback = ArchiveCallback(str(archive), archive_from=["other_sizes"])
    assert finished_before(sweep / "0") is None
    callback.on_job_start(config)
    assert completed(sweep / "0") and read_metrics(sweep / "0")["val/loss_best"] == 4.0
    assert read_metrics(sweep / "0")["restored_from"] == str(archive / "tune_x.jsonl")
    assert finished_before(sweep / "0")["val/loss_best"] == 4.0  # src/train.py returns this, training nothing

    with read_write(config.hydra), open_dict(config.hydra):  # the next job: not archived; it runs, finishes, is kept
        config.hydra.runtime.output_dir = str(sweep / "1")
        config.hydra.overrides.task = ["preset=frontier/ptb/lstm", "tune.lr_scale=4", "tune.tokens_per_step=512"]
    config.tune.lr_scale = 4
    callback.on_job_start(config)
    assert finished_before(sweep / "1") is None  # not archived: nothing restored, so src/train.py trains it
    write_metrics(sweep / "1" / "metrics.json", {"status": "completed", "val/loss_best": 3.5})
    callback.on_job_end(config, JobReturn(status=JobStatus.COMPLETED))
    assert Archive(archive, "tune_x").find(job_key(config))["metrics"]["val/loss_best"] == 3.5
