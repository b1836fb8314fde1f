"""The tuning protocol end to end, one command per corpus, resumable: `python -m seqbench.protocol.campaign <experiment>`.

experiments/tuning-protocol.md is a chain of sweeps, each read from the one before: the search, each
family's untuned recipe under the same protocol, the grid-edge extension (`tuning_extension`), the
final cells' size selection and then their seeds per tier (`final_cells`). Typed by hand, every
step is a chance to run the wrong grid, and a session stop leaves a person to work out where the
chain was. This runs the chain in order; a sweep that ended with every job done leaves
`campaign.done`, so running the same command again goes on where the last one stopped. A failed job
(or one a launcher lost: killed, with no outcome) is launched again, up to `ATTEMPTS` launches; one that
failed at each is named in `campaign.done` and the chain goes on (`run_sweep`).

Each sweep runs through a Hydra launcher. By default the project's resumable pool (`--jobs` at a time on
this machine: a killed job resumes from its last checkpoint, a finished one is skipped before it
starts). Any other launcher is named after `--` with its settings, and the chain runs the same: the
jobs are scheduled by that launcher, each job that finished before (or is in the archive) stops as it
starts (`seqbench.training.run.finished_before`), and a killed one resumes from its `last.ckpt` when
launched again (`seqbench.training.run`):

    python -m seqbench.protocol.campaign tune_frontier_ptb --jobs 1 -- logger=csv      # in the foreground
    bash scripts/campaign_background.sh tune_frontier_ptb --jobs 1 -- logger=csv   # in the background
    python -m seqbench.protocol.campaign tune_frontier_ptb --dry-run                   # the steps, their state, the cost
    python -m seqbench.protocol.campaign tune_frontier_ptb --cost-report <dir>         # the cost as cost.md + record.json
    python -m seqbench.protocol.campaign tune_frontier_ptb -- hydra/launcher=slurm hydra.launcher.partition=<p>  # on SLURM
    python -m seqbench.protocol.campaign tune_frontier_ptb -- hydra/launcher=submitit_local   # submitit, this machine

The sweeps, in the chain's order, are named `<experiment>`, `<experiment>_untuned`,
`<experiment>_edge_{tokens,lr}`, `<experiment>_transfer_<tier>_<family>` and
`<experiment>_transfer_tokens_<tier>_<family>` (the transfer check at every tier the search did not run
at, the highest first: the tuned rate and its two neighbours, the tuned tokens per step's grid
neighbours, and `<experiment>_transfer_lr_<tier>_<family>_<rate>` one rate further while the best lies
on the lowest or highest rate tried, `<experiment>_transfer_tokens_<tier>_<family>_<tokens>` twice the
tokens while the best lies on the most tried; the best checked trial is the family's setting at that tier,
`seqbench.protocol.transfer`),
`<frontier>_tuned_sizes` (the tiers where no family's setting moved) and `<frontier>_tuned_sizes_<tier>`
(every family at a tier where one moved, each at its setting there), `<frontier>_tuned_seeds_<tier>` and
`<frontier>_tuned_top_<tier>_seed<seed>` (one tier beyond the frontier's highest, three seeds, one
sweep each; `--top-families` limits it) under `--root`. `--steps` picks a part of the chain (the protocol runs top on
Tiny Shakespeare only).

Every finished job is also kept in the committed archive, `experiments/sweeps/<sweep>.jsonl`
(`--archive`; `seqbench.protocol.sweep_archive`: by the pool, or by each job under another launcher), and
restored from it when its output folder is gone: only the
repository survives a session stop, so a chain whose results lived only in `outputs/` would start
again from nothing. Commit the archive as the chain goes; the dry run counts only the jobs in
`--root`, so run the chain (it restores before it runs) to see a restored sweep as done.

The dry run ends with the chain's cost per step, read from the runs (`seqbench.protocol.campaign_cost`):
runs planned, finished and remaining, the core-hours measured and those estimated for the rest, so a
session plans (and cuts) from measurements rather than the page's typed budget.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from seqbench.families import compared
from seqbench.protocol.campaign_cost import report
from seqbench.protocol.chain import DONE, Chain, Sweep
from seqbench.protocol.sweep_archive import DEFAULT_DIR as DEFAULT_ARCHIVE
from seqbench.protocol.sweep_archive import Archive, ArchiveCallback
from seqbench.protocol.sweep_reads import stamp
from seqbench.provenance import command_line
from seqbench.training.hydra_callbacks import last_outcomes
from seqbench.training.record import completed, job_dirs


def _archived(archive: str, sweep: str) -> str:
    """How many of a sweep's jobs the archive holds (restored on its next launch, not trained), for the
    dry run: after a session stop `--root` is empty, and "to run" alone would plan hours already paid."""
    held = len(Archive(Path(archive), sweep).entries()) if archive != "none" else 0
    return f"; {held} job(s) in the archive, restored on launch" if held else ""


def failed_jobs(sweep: Path) -> list[int]:
    """Jobs whose last outcome in the launcher's `jobs.jsonl` is not `completed`, and jobs that started (their
    folder holds a record) and neither finished nor said how they ended: killed under a launcher that
    reports no outcome for a job it lost (submitit's), where the resumable pool records one."""
    outcomes = last_outcomes(sweep)
    lost = [int(d.name) for d in job_dirs(sweep, "*") if d.name.isdigit() and int(d.name) not in outcomes
            and not completed(d)]
    return sorted({*(job for job, record in outcomes.items() if record.get("status") != "completed"), *lost})


def launcher_of(extra: list[str]) -> str:
    """The launcher the command line after `--` names (`hydra/launcher=<name>`), else the resumable pool."""
    named = [w.split("=", 1)[1] for w in extra if w.lstrip("+~").startswith("hydra/launcher=")]
    return named[-1] if named else RESUMABLE


def sweep_words(sweep: Path, jobs: int, overrides: list[str], extra: list[str], archive: Path | None) -> list[str]:
    """The launch's Hydra arguments: the launcher's, the sweep's overrides, then the command line's after `--`.

    The resumable pool (the default) runs `jobs` at a time and keeps the archive itself. Any other launcher
    the user names schedules the jobs its own way (its settings go after `--` too:
    `hydra.launcher.partition=...`); each job then keeps the archive (`sweep_archive.ArchiveCallback`, which
    also takes a step's `hydra.launcher.archive_from`, a setting of the pool) and stops as it starts where
    it finished before (`seqbench.training.run.finished_before`)."""
    if launcher_of(extra) == RESUMABLE:
        words = ["-m", f"hydra/launcher={RESUMABLE}", f"hydra.sweep.dir={sweep}", f"hydra.launcher.jobs={jobs}"]
        words += [f"hydra.launcher.archive={Path(archive).resolve()}"] if archive is not None else []
        return [*words, *overrides, *extra]
    words = ["-m", f"hydra.sweep.dir={sweep}"]
    if archive is not None:
        words += [f"+hydra.callbacks.archive._target_={ArchiveCallback.__module__}.{ArchiveCallback.__name__}",
                  f"+hydra.callbacks.archive.directory={Path(archive).resolve()}"]
    pool = "hydra.launcher.archive_from="
    words += [f"+hydra.callbacks.archive.archive_from={o[len(pool):]}" for o in overrides
              if o.startswith(pool) and archive is not None]
    return [*words, *(o for o in overrides if not o.startswith(pool)), *extra]


def _alive(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
        return True
    except (OSError, ValueError):
        return False


ATTEMPTS = 3  # launches of a sweep in one call before a job that failed at each of them is given up on
RESUMABLE = "resumable"  # the default launcher: src/hydra_plugins/seqbench_launcher/resumable_launcher.py


def run_sweep(root: Path, name: str, overrides: list[str], jobs: int, extra: list[str], log=print,
              train: str = "src/train.py", attempts: int = ATTEMPTS, archive: Path | None = None) -> bool:
    """Launch (or resume) one sweep with the resumable launcher and wait for it; True once every job is
    done. A sweep another process is running is waited for, then resumed here (finished jobs are skipped).

    A job that failed is launched again (a job killed for memory on the shared machine completes on
    resume), up to `attempts` launches; one that failed at each of them fails for a reason a resumption
    does not change, and blocking every later step on it forever would stop the chain for good: the
    sweep is marked done with those jobs named in `campaign.done` (the tuning record counts them as
    failed). A launcher that failed with no failed job (the sweep did not compose), or was stopped by a
    signal (someone stopped it), stops the chain. `archive`: the folder the launcher keeps each finished
    job in and restores it from (`seqbench.protocol.sweep_archive`)."""
    sweep = root / name
    if (sweep / DONE).is_file():
        log(f"{name}: done before")
        return True
    sweep.mkdir(parents=True, exist_ok=True)
    pid_file = sweep / "launcher.pid"
    if pid_file.is_file() and _alive(pid_file):
        log(f"{name}: running in another process (pid {pid_file.read_text().strip()}); waiting for it")
        while _alive(pid_file):
            time.sleep(60)
    words = [sys.executable, train, *sweep_words(sweep, jobs, overrides, extra, archive)]
    ran = True
    for attempt in range(1, attempts + 1):
        before = stamp(sweep)
        again = f" (launch {attempt} of {attempts})" if attempt > 1 else ""
        log(f"{name}: {shlex.join(words[1:])}{again}")
        with open(sweep / "launcher.log", "a") as out:
            now = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())
            out.write(f"== {now} campaign: {shlex.join(words[3:])}\n")
            out.flush()
            proc = subprocess.Popen(words, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            pid_file.write_text(str(proc.pid))
            rc = proc.wait()
        failed = failed_jobs(sweep)
        if rc == 0 and not failed:
            (sweep / DONE).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
            log(f"{name}: done")
            return True
        # a launch that started no job (it failed before any ran: a job folder of another grid refused, a
        # config that does not compose) says nothing of the failures of earlier launches
        ran = stamp(sweep) != before
        if not failed or rc < 0 or not ran:  # nothing failed; a signal stopped it; or it ran nothing: no retry
            break
    if failed and rc >= 0 and ran:  # every launch reran them (completed jobs are skipped), and each time they failed
        (sweep / DONE).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                                  + f" failed at each of {attempts} launches: jobs {failed}\n")
        log(f"{name}: jobs {failed} failed at each of {attempts} launches; given up on (see jobs.jsonl), "
            f"the chain goes on")
        return True
    left = f"jobs not completed: {failed}" if failed else "no job failed"
    log(f"{name}: the launcher exited with {rc}, {left}; see launcher.log")
    return False


def _run_sweeps(todo: list[Sweep], args, extra: list[str]) -> list[str]:
    """Run a round of a step's sweeps, `args.sweeps_at_once` of them side by side; the names of those that did
    not complete. The sweeps of one round read only the steps before theirs, never each other, so their
    order does not matter; on the 2-core machine one at a time (each sweep's jobs fill the cores), on a
    machine with many cores or a GPU several, since a transfer check's sweep has only two or three jobs.
    Every sweep of the round runs to its end even where another stopped: a finished job is a finished job."""
    archive = None if args.archive == "none" else Path(args.archive)

    def one(sweep: Sweep) -> bool:
        return run_sweep(args.root, sweep[0], sweep[1], args.jobs, extra, archive=archive)

    if args.sweeps_at_once <= 1:
        for sweep in todo:  # in order, and the first that stops ends the round: the later ones wait for a person
            if not one(sweep):
                return [sweep[0]]
        return []
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(args.sweeps_at_once) as pool:
        completed = list(pool.map(one, todo))
    return [name for (name, _), ok in zip(todo, completed) if not ok]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m seqbench.protocol.campaign", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", help="the tuning experiment: tune_frontier or tune_frontier_ptb")
    parser.add_argument("--root", type=Path, default=Path("outputs/sweeps"), help="where the sweeps go")
    parser.add_argument("--jobs", type=int, default=2, help="jobs at a time (one thread each) in the resumable pool; "
                        "another launcher (-- hydra/launcher=<name>) schedules by its own settings")
    parser.add_argument("--archive", default=str(DEFAULT_ARCHIVE), help="the folder of the committed archive of "
                        "finished jobs (seqbench.protocol.sweep_archive); `none`: keep nothing there")
    parser.add_argument("--sweeps-at-once", type=int, default=1, help="a step's sweeps run side by side, this many "
                        "at a time, each with --jobs jobs (a machine with more cores than a sweep has jobs, or a GPU)")
    parser.add_argument("--steps", default=",".join(Chain.STEPS), help=f"which of {', '.join(Chain.STEPS)}")
    parser.add_argument("--top-families", default="", help="the families of the `top` step (comma-separated; "
                        "default: every family searched)")
    parser.add_argument("--dry-run", action="store_true", help="print each step's sweeps and state and the "
                        "chain's cost so far and to come (seqbench.protocol.campaign_cost), run nothing")
    parser.add_argument("--cost-report", type=Path, help="write the cost table there as cost.md with its "
                        "record.json (implies --dry-run)")
    args = parser.parse_args(argv)
    args.dry_run = args.dry_run or args.cost_report is not None
    chain = Chain(args.experiment, args.root)
    chain.top_families = tuple(f for f in args.top_families.split(",") if f)

    unknown = sorted(set(chain.top_families) - set(compared()))
    if unknown:  # a typo would otherwise leave the top step with nothing to run, silently
        parser.error(f"--top-families: {', '.join(unknown)} is not a compared family ({', '.join(compared())})")
    for step in args.steps.split(","):
        if step not in Chain.STEPS:
            parser.error(f"no step {step!r}: the steps are {', '.join(Chain.STEPS)}")
        if args.dry_run and not chain.ready(step):
            print(f"# {step}: waits for the steps before it")
            continue
        sweeps = getattr(chain, step)()
        print(f"# {step}: " + ("nothing to run" if not sweeps else f"{len(sweeps)} sweep(s)"))
        ran: set[str] = set()
        while todo := [(name, overrides) for name, overrides in sweeps if name not in ran]:
            ran.update(name for name, _ in todo)
            if args.dry_run:
                for name, overrides in todo:
                    state = "done" if (args.root / name / DONE).is_file() else "to run" + _archived(args.archive, name)
                    print(f"  {name} [{state}]: {shlex.join(overrides)}")
            elif stopped := _run_sweeps(todo, args, extra):
                print(f"# stopped at {step}: {', '.join(stopped)} did not complete; the same command resumes it")
                return 1
            # a step may grow from its own results (the transfer check's rate beyond a best on its edge):
            # computed again once its sweeps have run, until it adds nothing
            sweeps = sweeps if args.dry_run else getattr(chain, step)()
    if args.dry_run:
        print(f"\n# cost, per step (core-hours; one job = one core at one thread)\n"
              + report(chain, args.steps.split(","), args.jobs, args.cost_report,
                       command_line("seqbench.protocol.campaign", argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
