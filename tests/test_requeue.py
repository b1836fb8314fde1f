"""A cluster job in one line, and a pre-empted job that continues where it stopped.

`hydra/launcher=slurm` is a complete SLURM launcher (submitit) that requeues; a training process
told to stop by SIGTERM (what SLURM sends a pre-empted job) saves `last.ckpt` at the end of its
batch, and the same job started again in the same directory (what submitit's requeue does) resumes
from it instead of starting over.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import ROOT, compose_cfg


def test_the_slurm_launcher_is_one_override_and_requeues(tmp_path):
    from hydra.utils import instantiate

    cfg = compose_cfg(["hydra/launcher=slurm", "hydra.launcher.partition=gpu"], tmp_path)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher") and launcher.partition == "gpu"
    assert launcher.max_num_timeout >= 1 and launcher.signal_delay_s > 0  # requeued after a time-out
    assert launcher.gpus_per_node >= 1 and launcher.tasks_per_node == launcher.gpus_per_node
    assert instantiate(launcher).params["max_num_timeout"] == launcher.max_num_timeout  # submitit takes it


STEPS = 400
ARGS = ["model=lstm", "data=ptb", "model.hidden_size=8", "model.embedding_size=8", "data.bptt=5", "trainer=cpu",
        f"trainer.max_steps={STEPS}", "trainer.max_epochs=1000", "trainer.limit_val_batches=1",
        "trainer.val_check_interval=null", "trainer.check_val_every_n_epoch=1000", "test=false", "logger=csv",
        "callbacks.step_checkpoint.every_n_train_steps=10", "trainer.enable_progress_bar=false"]


def _step_of(path) -> int:
    return torch.load(path, map_location="cpu", weights_only=False)["global_step"]


@pytest.mark.slow
def test_a_sigterm_saves_last_ckpt_and_the_relaunched_job_resumes_from_it(tmp_path):
    run_dir = tmp_path / "run"
    cmd = [sys.executable, str(ROOT / "src" / "train.py"), *ARGS, f"hydra.run.dir={run_dir}",
           f"paths.log_dir={tmp_path}"]
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    last = run_dir / "checkpoints" / "last.ckpt"
    job = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while not last.is_file() and job.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert job.poll() is None, "the job ended before it could be pre-empted: " + job.stdout.read()[-2000:]
    job.send_signal(signal.SIGTERM)  # SLURM pre-empting the job
    first, _ = job.communicate(timeout=120)
    stopped = json.loads((run_dir / "metrics.json").read_text())
    assert stopped["status"] == "stopped" and "SIGTERM" in stopped["error"], first[-2000:]  # not failed: it resumes
    saved = _step_of(last)
    assert 10 <= saved < STEPS
    assert f"stopped by SIGTERM at step {saved}: saved {last}" in first  # at the stop, not the last 10th step

    # the requeue; while it trains, its metrics.json says so (not the stopped run's record)
    again = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = "stopped"
    while seen == "stopped" and again.poll() is None:
        seen = json.loads((run_dir / "metrics.json").read_text())["status"]
        time.sleep(0.01)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-3000:]
    assert seen == "running"
    printed = out + err
    assert f"resuming from {last}" in printed
    assert f"Restoring states from the checkpoint path at {last}" in printed
    finished = json.loads((run_dir / "metrics.json").read_text())
    assert finished["status"] == "completed" and _step_of(last) == STEPS
