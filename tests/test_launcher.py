"""Each job of a multirun runs in a fresh process, so no job's peak memory includes what the jobs
launched before it left resident (src/hydra_plugins/seqbench_launcher)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONF, ROOT

# A Hydra app whose first job leaves 300 MB resident, as a job's caches and allocator pools can; every
# job reports its peak RSS the way RunStats measures it (VmHWM after resetting it at the job's start).
APP = """
import json, sys
import hydra
sys.path.insert(0, {src!r})

LEFT_BEHIND = []

def hwm_mb():
    with open("/proc/self/status") as f:
        return int(next(l for l in f if l.startswith("VmHWM:")).split()[1]) / 1024

@hydra.main(version_base="1.3", config_path=None, config_name=None)
def main(cfg):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    if cfg.big:
        LEFT_BEHIND.append(b"x" * (300 * 2**20))
    with open(f"{{cfg.out}}/job{{cfg.big}}.json", "w") as f:
        json.dump({{"peak_mb": hwm_mb()}}, f)

if __name__ == "__main__":
    main()
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux's /proc")
@pytest.mark.parametrize("launcher", ["process", "basic"])
def test_a_small_job_after_a_big_one_reports_its_own_peak(tmp_path, launcher):
    app = tmp_path / "app.py"
    app.write_text(APP.format(src=str(ROOT / "src")))
    cmd = [sys.executable, str(app), "-m", "+big=1,0", f"+out={tmp_path}", f"hydra/launcher={launcher}",
           f"hydra.searchpath=[file://{CONF}]", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    big, small = (json.loads((tmp_path / f"job{b}.json").read_text())["peak_mb"] for b in (1, 0))
    assert big > 300
    # a job's process starts as the launcher's preloaded server (torch and Lightning imported: ~300 MB
    # here, which every training job imports anyway), the same for every job whatever ran before it
    if launcher == "process":
        assert big - small > 250  # the first job's 300 MB are gone
    else:  # the control: Hydra's basic launcher carries the first job's memory into the second's peak
        assert small > 300 and big - small < 50


def test_train_sweeps_use_the_process_launcher(cfg_factory=None):
    text = (CONF / "hydra" / "default.yaml").read_text()
    assert "override launcher: process" in text
    assert "hydra_plugins.seqbench_launcher.process_launcher.ProcessLauncher" in (CONF / "hydra" / "launcher" / "process.yaml").read_text()


ORPHAN = """
import os, signal, sys, threading, time
sys.path.insert(0, {src!r}); sys.path.insert(0, {tests!r})
from hydra_plugins.seqbench_launcher.process_launcher import run_in_fresh_process
import launcher_jobs

def kill_once_started():  # the launcher dies mid-job
    while not os.path.exists({pid_file!r} + ".started"):
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGKILL)

threading.Thread(target=kill_once_started, daemon=True).start()
run_in_fresh_process(launcher_jobs.{job}, {pid_file!r}, 2.0)
"""


# the launcher's parent, which does not wait for it: once killed, the launcher stays a zombie (as when a
# chain and its sweep's launcher are stopped together, until init reaps the launcher)
NOT_REAPING = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[1]])
time.sleep(100)
"""


@pytest.mark.parametrize("reaped", [True, False], ids=["launcher-reaped", "launcher-a-zombie"])
@pytest.mark.parametrize("job", ["sleep_then_record", "sleep_record_then_fail"])
def test_a_job_whose_launcher_died_exits_when_it_ends(tmp_path, job, reaped):
    # bugs caught: the job's pool worker, orphaned by `kill -- -<pgid>` of a sweep, finished its job (its
    # checkpoint saved) and then waited forever for a next task, a process left on the machine per job;
    # the same for a job that ends with an error, as one stopped by that SIGTERM does (seen 2026-11-29);
    # and for a launcher not yet reaped when its job ended, which still answered the job's "are you
    # there?" (two such workers were left by one stop of the chains, 2026-11-29)
    pid_file = tmp_path / "worker.pid"
    code = ORPHAN.format(src=str(ROOT / "src"), tests=str(ROOT / "tests"), pid_file=str(pid_file), job=job)
    parent = None
    if reaped:
        assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == -9  # SIGKILLed
    else:
        parent = subprocess.Popen([sys.executable, "-c", NOT_REAPING, code])
    try:
        _the_orphan_exits(pid_file)
    finally:
        if parent is not None:
            parent.kill()
            parent.wait()


def _the_orphan_exits(pid_file):
    import os
    import time

    deadline = time.monotonic() + 180  # the launcher starts its fork server (imports torch) first
    while not (pid_file.is_file() and pid_file.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.2)
    pid = int(pid_file.read_text())  # the worker finished its job after its launcher died
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(pid, 9)
    pytest.fail(f"the orphaned job process {pid} was still alive 30 s after its launcher died")


def test_a_job_directory_another_process_is_training_is_left_alone(tmp_path, launcher="resumable"):
    # bug caught: a relaunched sweep resuming a job whose process from the earlier launch was still
    # running (it was in a long validation when its launcher was stopped; seen 2026-11-29), so that two
    # processes wrote the same checkpoints and metrics; the other jobs of the sweep must still run (the
    # process launcher's jobs go through the same `_run_in_child`)
    from filelock import FileLock

    app = tmp_path / "app.py"
    app.write_text(APP.format(src=str(ROOT / "src")))
    (tmp_path / "sweep" / "0").mkdir(parents=True)
    cmd = [sys.executable, str(app), "-m", "+big=1,0", f"+out={tmp_path}", f"hydra/launcher={launcher}",
           f"hydra.searchpath=[file://{CONF}]", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    with FileLock(tmp_path / "sweep" / "0" / ".job.lock"):  # job 0's trainer, still alive
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert not (tmp_path / "job1.json").exists()  # job 0 (+big=1) did not run a second time
    assert (tmp_path / "job0.json").exists(), out.stderr[-3000:]  # job 1 ran
    assert "is being trained by another process" in out.stdout + out.stderr


def test_what_a_job_cannot_send_back_is_raised_in_the_launcher_as_its_text():
    # bugs caught: an exception or a result that does not pickle lost (the launcher would wait for a
    # result, or fail to unpack the pickling error sent bare in place of one)
    sys.path.insert(0, str(ROOT / "tests"))
    import launcher_jobs

    from hydra_plugins.seqbench_launcher.process_launcher import run_in_fresh_process

    with pytest.raises(RuntimeError, match="ValueError: boom"):
        run_in_fresh_process(launcher_jobs.raise_unpicklable)
    with pytest.raises(RuntimeError, match="its result could not be sent"):
        run_in_fresh_process(launcher_jobs.return_unpicklable)
