"""A Hydra launcher that runs each job of a multirun in a fresh process, one after another.

Hydra's basic launcher runs every job in the launching process, so a job inherits whatever the jobs
before it left behind: memory that stays resident (the allocator keeps freed pages, caches grow), so
the peak RSS recorded in `metrics.json` rose in launch order across the PTB families; and also
imported state, thread pools and RNG streams. Resetting the kernel's high-water mark (VmHWM) per job
does not help: it restarts from the current RSS, which already holds the earlier jobs' leftovers,
and measuring from that RSS instead would credit a job with memory it reuses. A fresh process per job
makes every job's numbers independent of the launch order; `hydra/launcher=basic` restores Hydra's
launcher.

The fresh process is forked from a server that has imported what every job imports (`PRELOAD`: torch,
Lightning, Hydra, seqbench's run) and nothing else, and has run nothing (multiprocessing's
`forkserver` with `set_forkserver_preload`). A newly spawned interpreter spent ~9 s of CPU on those
imports before each job (torch._dynamo via Lightning, scipy.signal via torchmetrics): a third of a
1e11-FLOPs frontier run. Every job still starts from the same state, the server's, whatever the jobs
before it did. Measured on 2026-11-29 (2-core AMD EPYC, nothing else running): a multirun of three
5-step PTB LSTM jobs took 60.0 and 62.1 s of wall time spawned, 35.4 and 35.9 s forked from the server.
A job's peak RSS (VmHWM) starts from the server's pages rather than its own imports': the same tiny
job recorded 562 MB forked against 611 MB spawned, for every job alike, so peak memory compares
across runs of one launcher, not between runs before and after this change.

Jobs still run one at a time, so their timings do not compete for the CPU. A job whose process dies
(killed for memory, a crash in native code) is recorded as failed, and the sweep goes on.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Sequence
from multiprocessing import get_context
from pathlib import Path

import cloudpickle
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from omegaconf import open_dict

log = logging.getLogger(__name__)

# what each job imports anyway, imported once by the server its processes are forked from (an import
# that fails there is left to the job, which then reports it as it would have)
PRELOAD = ["torch", "lightning", "seqbench.entry", "seqbench.training.run", "hydra_plugins.seqbench_launcher.resumable_launcher"]


def job_context():
    """The multiprocessing context a job's fresh process comes from: forked from a preloaded server."""
    context = get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


class JobDied(RuntimeError):
    """The job's process ended without sending a result (killed, e.g. for memory, or a crash in native code)."""


def _alive(pid: int) -> bool:
    """Whether the process `pid` still runs: a zombie (dead, its parent not yet waiting for it, as when the
    launcher and its parent are stopped together) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process now holds the number: ours is gone
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): the signal test alone


def _call_and_send(send, launcher_pid: int, fn, args) -> None:
    """The fresh process's one call: `fn(*args)`, its result or its exception sent to the launcher, and
    the process ends. A job whose launcher is gone when it ends (a sweep stopped with `kill -- -<pgid>`:
    the job saves its last.ckpt on the SIGTERM, then ends) exits without sending: nobody would read it."""
    try:
        out = (True, fn(*args))
    except BaseException as error:  # noqa: BLE001 - a job stopped by SIGTERM ends in a SystemExit: re-raised there
        out = (False, error)
    if not _alive(launcher_pid):
        os._exit(0)
    try:
        send.send(out)
    except BrokenPipeError:  # the launcher died since
        os._exit(0)
    except Exception as error:  # noqa: BLE001 - a result or exception that does not pickle: its text goes instead
        what = f"{type(out[1]).__name__}: {out[1]}" if not out[0] else f"its result could not be sent ({error})"
        send.send((False, RuntimeError(what)))


def run_in_fresh_process(fn, *args):
    """`fn(*args)` in a fresh process forked from the preloaded server (`job_context`); its result returned,
    its exception raised here, `JobDied` where the process ended without either.

    One process per call, which ends with the call: a pool's worker waits for its next task after its
    job, and when the launcher was gone by then (stopped with its parent, so still a zombie when the job
    asked after it) it waited forever, holding its memory: the orphans piled up on the machine
    (seen 2026-11-29, two from one stop of the chains)."""
    context = job_context()
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_call_and_send, args=(send, os.getpid(), fn, args))
    process.start()
    send.close()  # the child holds the only write end now: its death reads as EOF here
    try:
        ok, value = receive.recv()
    except EOFError:
        process.join()
        raise JobDied(f"the job's process ended (exit code {process.exitcode}) without a result") from None
    finally:
        receive.close()
    process.join()
    if not ok:
        raise value
    return value


def _run_in_child(payload: bytes) -> bytes:
    """One job, in the fresh process: Hydra's globals as the launcher had them, then `run_job`; its
    `JobReturn` goes back through cloudpickle too (the configs hold classes Hydra's plugin scan
    re-imported, which plain pickle refuses)."""
    from filelock import FileLock, Timeout

    hydra_context, task_function, config, singleton_state = pickle.loads(payload)
    setup_globals()
    Singleton.set_state(singleton_state)
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    HydraConfig.instance().set_config(config)
    job_dir = Path(str(config.hydra.sweep.dir)) / str(config.hydra.sweep.subdir)
    job_dir.mkdir(parents=True, exist_ok=True)
    # one process trains a job directory at a time: a job left running by a launcher that was stopped (one
    # still in a long validation when SIGTERM came) and the relaunched sweep's resumption of the same job
    # would write the same checkpoints and metrics. The lock goes with the process that holds it.
    lock = FileLock(job_dir / ".job.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return cloudpickle.dumps(_busy(config, job_dir))
    ret = run_job(hydra_context=hydra_context, task_function=task_function, config=config,
                  job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    if ret.status == JobStatus.FAILED:  # the exception goes back to the launcher: make sure it can
        try:
            pickle.loads(cloudpickle.dumps(ret._return_value))
        except Exception:
            error = ret._return_value
            ret._return_value = RuntimeError(f"{type(error).__name__}: {error}")
    return cloudpickle.dumps(ret)


def _busy(config, job_dir: Path) -> JobReturn:
    """A job another live process is training: failed here, untouched there."""
    ret = JobReturn(overrides=list(config.hydra.overrides.task), cfg=config, hydra_cfg=config.hydra,
                    status=JobStatus.FAILED, working_dir=str(job_dir), task_name=config.hydra.job.name)
    ret._return_value = RuntimeError(f"{job_dir} is being trained by another process (a job of an earlier launch "
                                     f"of this sweep, still running): stop it, or let it finish, then launch again")
    return ret


class ProcessLauncher(Launcher):
    def __init__(self) -> None:
        self.config = self.task_function = self.hydra_context = None

    def setup(self, *, hydra_context, task_function, config) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        log.info(f"Launching {len(job_overrides)} jobs locally, each in a fresh process")
        runs = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(config):
                config.hydra.job.id = idx
                config.hydra.job.num = idx
            HydraConfig.instance().set_config(config)
            # cloudpickle: the task function is usually the entry script's `main`, which plain pickle
            # can only name, and `@hydra.main` has replaced that name with its wrapper
            payload = cloudpickle.dumps((self.hydra_context, self.task_function, config, Singleton.get_state()))
            try:
                ret = pickle.loads(run_in_fresh_process(_run_in_child, payload))
            except JobDied:
                ret = self._died(config, list(overrides))
            runs.append(ret)
            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return runs

    def _died(self, config, overrides: list[str]) -> JobReturn:
        """A job whose process ended without a result: failed, and reported as every failure is."""
        error = RuntimeError("the job's process died without a result (killed, e.g. for memory, or a crash "
                             "in native code); see its log in the job's directory")
        hydra_cfg = config.hydra
        ret = JobReturn(overrides=overrides, cfg=config, hydra_cfg=hydra_cfg, status=JobStatus.FAILED,
                        working_dir=str(Path(str(hydra_cfg.sweep.dir)) / str(hydra_cfg.sweep.subdir)),
                        task_name=hydra_cfg.job.name)
        ret._return_value = error
        self.hydra_context.callbacks.on_job_end(config=config, job_return=ret)
        return ret
