"""A Hydra launcher for sweeps that outlive the session that started them: several jobs at once,
finished jobs skipped, killed ones resumed.

`hydra/launcher=resumable` runs each job in a fresh process, as `process` does, `jobs` of them side
by side (one per core, each limited to `threads_per_job` threads so they do not compete). Launched
again with the same `hydra.sweep.dir`, the grid expands to the same job numbers and directories, and:

- a job whose record (`metrics.json`) says `status: completed` is skipped (its results stay as they are);
- any other job runs again in its own directory, where `seqbench.training.run` finds `checkpoints/last.ckpt`
  (written every `callbacks.step_checkpoint.every_n_train_steps` steps and on SIGTERM) and resumes
  from it (`resume_requeued`), so a killed run loses at most the steps since that checkpoint.

With `archive=<dir>` (the campaign sets it to the committed `experiments/sweeps/`), each finished job
is also kept in `<dir>/<sweep name>.jsonl`, and a job found there (by what it trains, not its number)
is restored into its directory instead of run (`seqbench.protocol.sweep_archive`): the sweep outlives the loss
of its output folder, which is what a session stop does to everything outside the repository.
`archive_from=[<sweep>, ...]` lets it restore jobs the named sweeps of that folder archived too (its own
entry wins): the same key is the same training, so a tier's own size sweep takes the runs the first size
sweep already made at that tier (`seqbench.protocol.final_cells`).

`scripts/sweep_background.sh` starts such a sweep in the background under a fixed directory, so the
same command, after a session stop or a reboot, carries on where the sweep was.

A job's process outlives its launcher by design: `kill -- -<pgid>` sends SIGTERM to both, and the job
saves its `last.ckpt` before it stops. What it must not do is stay: each job's process runs that one
job and ends (`process_launcher.run_in_fresh_process`), so none waits for a next task, as pool workers
did when their launcher was gone, piling up across sessions.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cloudpickle
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from omegaconf import open_dict, read_write

from hydra_plugins.seqbench_launcher.process_launcher import (
    JobDied,
    ProcessLauncher,
    _run_in_child,
    run_in_fresh_process,
)

log = logging.getLogger(__name__)


def completed(job_dir: Path) -> bool:
    """The job finished before: its record says so (a killed or failed run's does not)."""
    # seqbench is imported when a sweep launches, not when Hydra scans its plugins at every command's start
    from seqbench.training.record import completed as finished

    return finished(job_dir)


def _check_same_job(job_dir: Path, overrides: Sequence[str]) -> None:
    """Refuse a job directory that holds another job: a sweep relaunched into the same folder with
    another grid numbers its jobs anew, and job 7's finished results (or last.ckpt) would be taken for
    a job they are not — skipped as done, archived under the new job's key, or resumed from."""
    saved = job_dir / ".hydra" / "overrides.yaml"
    from seqbench.training.record import has_record

    if not saved.is_file() or not (has_record(job_dir)
                                   or (job_dir / "checkpoints" / "last.ckpt").is_file()):
        return  # nothing there would be taken for the job: no result, no checkpoint to resume from
    from omegaconf import OmegaConf

    from seqbench.errors import ConfigError
    from seqbench.protocol.sweep_archive import same_job

    try:
        ran = list(OmegaConf.load(saved) or [])
    except Exception as error:  # noqa: BLE001 - a file cut short by a kill: the folder is run again
        log.warning(f"{saved} could not be read ({type(error).__name__}); its job is not checked")
        return
    if not ran:
        log.warning(f"{saved} is empty (cut short by a kill?); its job is not checked")
        return
    if not same_job(ran, list(overrides)):
        raise ConfigError(f"{job_dir} holds another job ({' '.join(ran)}) than this sweep's job {job_dir.name} "
                          f"({' '.join(overrides)}): the sweep's grid changed since it ran there. Give the sweep "
                          f"its own hydra.sweep.dir, or move the old folder away; nothing was run.")


def _run_with_threads(payload: bytes, threads: int | None) -> bytes:
    if threads:
        import torch

        torch.set_num_threads(threads)
    return _run_in_child(payload)


class ResumableLauncher(ProcessLauncher):
    def __init__(self, jobs: int = 2, threads_per_job: int | None = 1, archive: str | None = None,
                 archive_from: Sequence[str] | None = None) -> None:
        super().__init__()
        self.jobs, self.threads_per_job, self.archive_dir = jobs, threads_per_job, archive
        self.archive_from = list(archive_from or [])
        self.archive = None

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        returns: dict[int, JobReturn] = {}
        pending = []
        restored = 0
        from seqbench.protocol.sweep_archive import Archive, curve_of, key_text, restore
        from seqbench.training.record import read_metrics

        archived, found_in = {}, {}  # key -> entry, and the archive file it came from
        if self.archive_dir:
            self.archive = Archive(Path(str(self.archive_dir)), sweep_dir.name)
            # the other sweeps first, so that this sweep's own entry wins: the same key is the same training
            for archive in [*(Archive(Path(str(self.archive_dir)), name) for name in self.archive_from), self.archive]:
                for key, entry in archive.entries().items():
                    archived[key], found_in[key] = entry, archive.path
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(config):
                config.hydra.job.id = idx
                config.hydra.job.num = idx
            HydraConfig.instance().set_config(config)
            job_dir = sweep_dir / str(config.hydra.sweep.subdir)
            _check_same_job(job_dir, overrides)
            key = self._key(config)
            entry = archived.get(key_text(key)) if key is not None else None
            if entry is not None and not completed(job_dir):
                restore(job_dir, config, entry, found_in[key_text(key)], self._compose)
                restored += 1
            elif key is not None and entry is None and completed(job_dir):  # finished before the archive
                self.archive.append(key, job_dir.name, read_metrics(job_dir),
                                    curve=curve_of(job_dir))
            if completed(job_dir):
                log.info(f"\t#{idx} : skipped, completed in {job_dir}")
                returns[idx] = JobReturn(overrides=list(overrides), cfg=config, hydra_cfg=config.hydra,
                                         working_dir=str(job_dir), task_name=config.hydra.job.name,
                                         status=JobStatus.COMPLETED, _return_value=None)
                continue
            resumed = " (resumes from its last.ckpt)" if (job_dir / "checkpoints" / "last.ckpt").is_file() else ""
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}{resumed}")
            payload = cloudpickle.dumps((self.hydra_context, self.task_function, config, Singleton.get_state()))
            pending.append((idx, config, list(overrides), payload, key))
        log.info(f"Launching {len(pending)} of {len(job_overrides)} jobs, {self.jobs} at a time, each in a fresh "
                 f"process ({len(job_overrides) - len(pending)} completed before"
                 + (f", {restored} of them restored from {self.archive.path}" if self.archive else "")
                 + (f" or {', '.join(self.archive_from)}" if self.archive and self.archive_from else "") + ")")
        with ThreadPoolExecutor(max_workers=max(1, self.jobs)) as threads:
            for idx, ret in threads.map(self._run_one, pending):
                returns[idx] = ret
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return [returns[i] for i in sorted(returns)]

    def _run_one(self, job) -> tuple[int, JobReturn]:
        idx, config, overrides, payload, key = job
        try:
            ret = pickle.loads(run_in_fresh_process(_run_with_threads, payload, self.threads_per_job))
        except JobDied:
            return idx, self._died(config, overrides)
        job_dir = Path(str(config.hydra.sweep.dir)) / str(config.hydra.sweep.subdir)
        if key is not None and completed(job_dir):
            from seqbench.protocol.sweep_archive import curve_of
            from seqbench.training.record import read_metrics

            self.archive.append(key, job_dir.name, read_metrics(job_dir),
                                curve=curve_of(job_dir))
        return idx, ret

    def _compose(self, overrides: list[str]):
        """The sweep's primary config composed with other overrides, without its `hydra` node, as the
        running job's `hydra.compose` gives it (`seqbench.entry.final_config`): for a restored job's recipe."""
        config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with read_write(config), open_dict(config):
            del config["hydra"]
        return config

    # -- the archive (seqbench.protocol.sweep_archive) --------------------------------------------------------
    def _key(self, config) -> dict | None:
        """The job's archive key, where there is an archive; a config the key cannot be read from (a
        task that is not a seqbench training run) is not archived, rather than failing the sweep."""
        if self.archive is None:
            return None
        from seqbench.protocol.sweep_archive import job_key

        try:
            return job_key(config)
        except Exception as error:  # noqa: BLE001 - the sweep runs either way
            log.warning(f"job not archived: its key could not be read ({type(error).__name__}: {error})")
            return None
