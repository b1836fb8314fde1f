"""hydra/launcher=resumable: a sweep launched again skips its completed jobs and resumes a killed one
from its last.ckpt (src/hydra_plugins/seqbench_launcher/resumable_launcher.py)."""

from __future__ import annotations

import json
import os

import pytest
import torch

from conftest import ROOT, run_cli


def _metrics(job):
    path = job / "metrics.json"
    return json.loads(path.read_text()) if path.is_file() else {}


@pytest.mark.slow
@pytest.mark.corpus("ptb")
def test_a_killed_sweep_skips_finished_jobs_and_resumes_the_killed_one(tmp_path):
    sweep = tmp_path / "sweep"
    marker = tmp_path / "killed"
    args = ["-m", "hydra/launcher=resumable", f"hydra.sweep.dir={sweep}", "model=lstm", "data=ptb", "seed=1,2",
            "logger=csv", "trainer=cpu", "trainer.max_steps=6", "trainer.max_epochs=-1", "trainer.val_check_interval=3",
            "trainer.limit_val_batches=2", "trainer.limit_test_batches=2", "trainer.num_sanity_val_steps=0",
            "~callbacks.model_summary", "~callbacks.progress_bar", "model.embedding_size=16", "model.hidden_size=16",
            "callbacks.step_checkpoint.every_n_train_steps=2",
            # job 1 dies at step 3, once, as a session stop would leave it: last.ckpt of step 2, no metrics
            "+callbacks.kill._target_=kill_once.KillOnce", "+callbacks.kill.step=3", f"+callbacks.kill.marker={marker}",
            "+callbacks.kill.job_num=${hydra:job.num}", "+callbacks.kill.only_job=1"]
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    first = run_cli(args, tmp_path, env=env)
    assert marker.is_file(), first.stderr[-3000:]
    assert _metrics(sweep / "0").get("status") == "completed", first.stderr[-3000:]
    assert _metrics(sweep / "1").get("status") != "completed"
    assert torch.load(sweep / "1" / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 2
    finished = (sweep / "0" / "metrics.json").stat().st_mtime_ns

    second = run_cli(args, tmp_path, env=env)
    log = second.stdout + second.stderr
    assert "#0 : skipped, completed" in log and "#1 : " in log and "resumes from its last.ckpt" in log, log[-3000:]
    assert (sweep / "0" / "metrics.json").stat().st_mtime_ns == finished  # not run again
    assert _metrics(sweep / "1").get("status") == "completed", log[-3000:]
    assert "resuming from" in (sweep / "1" / "train.log").read_text()
    assert torch.load(sweep / "1" / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 6
