"""The tuning protocol end to end, one command per corpus, resumable: `python -m seqbench.campaign <experiment>`.

experiments/tuning-protocol.md is a chain of sweeps, each read from the one before: the search, each
family's untuned recipe under the same protocol, the grid-edge extension (`tuning_extension`), the
final cells' size selection and then their seeds per tier (`final_cells`). Typed by hand, every
step is a chance to run the wrong grid, and a session stop leaves a person to work out where the
chain was. This runs the chain in order; each sweep goes through the resumable launcher (a killed
job resumes from its last checkpoint, a finished one is skipped), and a sweep that ended with every
job done leaves `campaign.done`, so running the same command again goes on where the last one stopped.
A failed job is launched again, up to `ATTEMPTS` launches; one that failed at each is named in
`campaign.done` and the chain goes on (`run_sweep`).

    python -m seqbench.campaign tune_frontier_ptb --jobs 1 -- logger=csv      # in the foreground
    bash scripts/campaign_background.sh tune_frontier_ptb --jobs 1 -- logger=csv   # in the background
    python -m seqbench.campaign tune_frontier_ptb --dry-run                   # the steps, their state, the cost
    python -m seqbench.campaign tune_frontier_ptb --cost-report <dir>         # the cost as cost.md + record.json

The sweeps, in the chain's order, are named `<experiment>`, `<experiment>_untuned`,
`<experiment>_edge_{tokens,lr}`, `<experiment>_transfer_<tier>_<family>` and
`<experiment>_transfer_tokens_<tier>_<family>` (the transfer check at every tier the search did not run
at, the highest first: the tuned rate and its two neighbours, the tuned tokens per step's grid
neighbours, and `<experiment>_transfer_lr_<tier>_<family>_<rate>` one rate further while the best lies
on the lowest or highest rate tried, `<experiment>_transfer_tokens_<tier>_<family>_<tokens>` twice the
tokens while the best lies on the most tried; the best checked trial is the family's setting at that tier,
`seqbench.transfer`),
`<frontier>_tuned_sizes` (and `<frontier>_tuned_sizes_<tier>` for the families whose setting moved at a
tier), `<frontier>_tuned_seeds_<tier>` and
`<frontier>_tuned_top_<tier>_seed<seed>` (one tier beyond the frontier's highest, two seeds, one
sweep each; `--top-families` limits it) under `--root`. `--steps` picks a part of the chain (the protocol runs top on
Tiny Shakespeare only).

Every finished job is also kept in the committed archive, `experiments/sweeps/<sweep>.jsonl`
(`--archive`; `seqbench.sweep_archive`), and restored from it when its output folder is gone: only the
repository survives a session stop, so a chain whose results lived only in `outputs/` would start
again from nothing. Commit the archive as the chain goes; the dry run counts only the jobs in
`--root`, so run the chain (it restores before it runs) to see a restored sweep as done.

The dry run ends with the chain's cost per step, read from the runs (`seqbench.analysis.campaign_cost`):
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

from omegaconf import OmegaConf

from seqbench.sweep_archive import DEFAULT_DIR as DEFAULT_ARCHIVE
from seqbench.sweep_reads import SweepReads

DONE = "campaign.done"
Sweep = tuple[str, list[str]]  # (sweep name, overrides)


def parse_commands(lines: list[str]) -> list[Sweep]:
    """The `bash scripts/sweep_background.sh <name> <overrides...>` lines the tuning tools print, as sweeps
    (comment lines are skipped)."""
    out = []
    for line in lines:
        if line.startswith("bash scripts/sweep_background.sh "):  # comments are prose: not split as words
            words = shlex.split(line)
            out.append((words[2], words[3:]))
    return out


class Chain:
    """The protocol's steps for one tuning experiment, each computed from the sweeps already run."""

    def __init__(self, experiment: str, root: Path):
        self.experiment, self.root = experiment, Path(root)
        self._read = SweepReads()  # read once per finished job (`seqbench.sweep_reads`)

    def search_dirs(self) -> list[Path]:
        names = [self.experiment, f"{self.experiment}_edge_tokens", f"{self.experiment}_edge_lr"]
        return [self.root / n for n in names if (self.root / n).is_dir()]

    def search(self) -> list[Sweep]:
        return [(self.experiment, [f"experiment={self.experiment}"])]

    def untuned(self) -> list[Sweep]:
        return [(f"{self.experiment}_untuned", [f"experiment={self.experiment}", "tune.schedule=null",
                                                "tune.lr_scale=1", "tune.tokens_per_step=null"])]

    def edges(self) -> list[Sweep]:
        from seqbench.analysis.tuning_extension import commands
        from seqbench.analysis.tuning_search import searches
        from seqbench.analysis.tuning_trials import planned, read_trials

        base = self.root / self.experiment
        found = searches(read_trials([base]), planned(base) or {})
        return parse_commands(commands(found, [base]))

    def sizes(self) -> list[Sweep]:
        return self._final(None)

    def seeds(self) -> list[Sweep]:
        return self._final(self.size_dirs())

    def size_dirs(self) -> list[Path]:
        """The size-selection sweeps: `<frontier>_tuned_sizes` and one `<frontier>_tuned_sizes_<tier>` per
        tier where the transfer check moved a family's setting."""
        from seqbench.final_cells import Experiment

        name = f"{Experiment(self.experiment).frontier}_tuned_sizes"
        found = sorted(self.root.glob(f"{name}_*")) if self.root.is_dir() else []
        return [d for d in [self.root / name, *found] if d.is_dir()]

    def transfer_dirs(self) -> list[Path]:
        return sorted(self.root.glob(f"{self.experiment}_transfer_*")) if self.root.is_dir() else []

    def _final(self, sizes: list[Path] | None) -> list[Sweep]:
        from seqbench.final_cells import Experiment, final_commands

        size_runs = self._read(sizes) if sizes else None
        tuned, moved = self._settings()
        return parse_commands(final_commands(tuned, Experiment(self.experiment), size_runs, moved=moved))

    def checks(self) -> tuple[dict[str, dict], dict]:
        """Each family's tuned setting, and the transfer check of each (family, tier) it has reached
        (`seqbench.transfer.checks`)."""
        from collections import Counter

        from seqbench.analysis.campaign_cost import sweep_jobs
        from seqbench.transfer import checks

        found, dirs = self._searches(), self.transfer_dirs()
        tuned = self._tuned(found)
        planned = Counter(job for _, overrides in self._transfer(found) for job in sweep_jobs(overrides))
        return tuned, checks(self._read(dirs), tuned, planned) if dirs else {}

    def _settings(self) -> tuple[dict[str, dict], dict[tuple[str, float], dict]]:
        """Each family's tuned setting, and where the transfer check moved it at a tier, the one it chose there."""
        from seqbench.transfer import per_tier

        tuned, found = self.checks()
        return tuned, per_tier(tuned, found)

    def transfer(self) -> list[Sweep]:
        """The transfer check, at every tier of the frontier the search did not run at, the highest first
        (where the inherited setting has the most steps it was not tuned for): each family at the searched
        size, one seed: its tuned setting and its two rate neighbours (lr x/÷ 2), one sweep; then its
        neighbours one grid step away on the tokens-per-step axis at its tuned rate, a second sweep
        (`_transfer_tokens_`): the tokens a step should hold grow with the budget (McCandlish et al.
        2018), and a search at a small budget favours the fewest. Where the best of the rates tried lies
        on the lowest or the highest of them, one sweep more, a rate one step further that way
        (`seqbench.transfer.rate_extensions`), and where the best of the tokens tried at the tuned rate is
        the most of them, one sweep of twice that (`token_extensions`): this step grows from its own
        results, and `main` computes it again after running it. The best checked trial is the family's setting at that tier
        (`seqbench.transfer`)."""
        return self._transfer(self._searches())

    def _transfer(self, found: list) -> list[Sweep]:
        from seqbench.analysis.tuning_search import token_neighbours
        from seqbench.final_cells import Experiment, flops_text
        from seqbench.transfer import rate_extensions, token_extensions
        from seqbench.tuning import searched

        experiment = Experiment(self.experiment)
        searched_tier, size = _searched(self.experiment)
        grids, tuned = token_neighbours(found), self._tuned(found)
        dirs = self.transfer_dirs()
        checked = {(s.family, float(s.budget)): s for s in searched(self._read(dirs)) if s.budget} if dirs else {}
        out = []
        for tier in sorted((t for t in experiment.tiers() if t != searched_tier), reverse=True):
            for family, setting in tuned.items():
                lr = float(setting["lr_scale"])
                common = [f"experiment={self.experiment}", f"preset={experiment.presets[family]}", f"size={size}",
                          f"budget.flops={flops_text(tier)}"]
                out.append((f"{self.experiment}_transfer_{flops_text(tier)}_{family}",
                            [*common, f"tune.lr_scale={lr / 2:g},{lr:g},{lr * 2:g}",
                             f"tune.tokens_per_step={setting['tokens_per_step']}"]))
                if grids.get(family):
                    out.append((f"{self.experiment}_transfer_tokens_{flops_text(tier)}_{family}",
                                [*common, f"tune.lr_scale={lr:g}",
                                 "tune.tokens_per_step=" + ",".join(map(str, grids[family]))]))
                for rate in rate_extensions(checked.get((family, float(tier))), setting):
                    out.append((f"{self.experiment}_transfer_lr_{flops_text(tier)}_{family}_{rate:g}",
                                [*common, f"tune.lr_scale={rate:g}", f"tune.tokens_per_step={setting['tokens_per_step']}"]))
                for tokens in token_extensions(checked.get((family, float(tier))), setting, grids.get(family)):
                    out.append((f"{self.experiment}_transfer_tokens_{flops_text(tier)}_{family}_{tokens}",
                                [*common, f"tune.lr_scale={lr:g}", f"tune.tokens_per_step={tokens}"]))
        return out

    def top(self) -> list[Sweep]:
        """One tier beyond the frontier's highest: each family (of `self.top_families`, all by default) at
        the size chosen at the highest tier, with its setting there (the transfer check's, where it moved
        the tuned one: the nearest tier checked), two seeds, one sweep per seed. A
        multirun varies its last key fastest (the seed), so one sweep of both seeds would run every seed
        of one family before the next family: the tier's runs take several sessions, and a chain stopped
        half-way would leave some families with two seeds and others with none. Seed by seed, every
        family has its first number before any has its second."""
        from seqbench.final_cells import Experiment, chosen_sizes, command, flops_text
        from seqbench.transfer import setting_at

        experiment = Experiment(self.experiment)
        highest = max(experiment.tiers())
        tuned, moved = self._settings()
        chosen = chosen_sizes(self._read(self.size_dirs()), lambda f, t: setting_at(tuned, moved, f, t) if f in tuned else None)
        settings = {f: {**setting_at(tuned, moved, f, highest), "size": chosen[(f, highest)]} for f in tuned
                    if (f, highest) in chosen and (not self.top_families or f in self.top_families)}
        if not settings:
            return []
        first_seed = OmegaConf.load(experiment.conf_dir / "train.yaml").seed
        tier = flops_text(highest * 10)
        return parse_commands([command(f"{experiment.frontier}_tuned_top_{tier}_seed{seed}", experiment,
                                       [highest * 10], str(seed), settings) for seed in (first_seed, 2)])

    def _searches(self) -> list:
        """The search's runs (its grid and the grid's extension) as `Search`es: read once for a step,
        which takes both the tuned settings and the grid around them from them."""
        from seqbench.tuning import searched

        return searched(self._read(self.search_dirs()))

    @staticmethod
    def _tuned(searches: list) -> dict[str, dict]:
        from seqbench.tuning import per_family, rows

        return per_family(rows(searches))

    def ready(self, step: str) -> bool:
        """Whether a step's sweeps can be computed yet (for the dry run; the chain itself runs the steps in
        order): the untuned recipes and the grid's extension read the search; the transfer check and the
        sizes read the extension as well (before it, they would come from the base grid alone; the sizes'
        sweeps of the tiers the transfer check moved come from the check so far); the seeds and the top
        tier read every size sweep's runs."""
        from seqbench.final_cells import Experiment

        def done(name: str) -> bool:
            return (self.root / name / DONE).is_file()

        if step == "search":
            return True
        if step in ("untuned", "edges"):
            return done(self.experiment)
        extended = done(self.experiment) and all(done(name) for name, _ in self.edges())
        if not extended or step in ("transfer", "sizes"):
            return extended
        return all(done(name) for name, _ in self.sizes())

    STEPS = ("search", "untuned", "edges", "transfer", "sizes", "seeds", "top")
    top_families: tuple[str, ...] = ()


def _archived(archive: str, sweep: str) -> str:
    """How many of a sweep's jobs the archive holds (restored on its next launch, not trained), for the
    dry run: after a session stop `--root` is empty, and "to run" alone would plan hours already paid."""
    from seqbench.sweep_archive import Archive

    held = len(Archive(Path(archive), sweep).entries()) if archive != "none" else 0
    return f"; {held} job(s) in the archive, restored on launch" if held else ""


def _searched(experiment: str) -> tuple[float, str]:
    """The tier and size the tuning experiment searches (its `budget.flops` axis and `size`)."""
    from seqbench.compose import CONF_DIR

    conf = OmegaConf.load(CONF_DIR / "experiment" / f"{experiment}.yaml")
    return float(str(conf.hydra.sweeper.params["budget.flops"])), str(conf.size)


def failed_jobs(sweep: Path) -> list[int]:
    """Jobs whose last outcome in the launcher's `jobs.jsonl` is not `completed`."""
    from seqbench.hydra_callbacks import last_outcomes

    return sorted(job for job, record in last_outcomes(sweep).items() if record.get("status") != "completed")


def _alive(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
        return True
    except (OSError, ValueError):
        return False


ATTEMPTS = 3  # launches of a sweep in one call before a job that failed at each of them is given up on


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
    job in and restores it from (`seqbench.sweep_archive`)."""
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
    words = [sys.executable, train, "-m", "hydra/launcher=resumable", f"hydra.sweep.dir={sweep}",
             f"hydra.launcher.jobs={jobs}", *overrides, *extra]
    if archive is not None:
        words.insert(5, f"hydra.launcher.archive={Path(archive).resolve()}")
    ran = True
    for attempt in range(1, attempts + 1):
        outcomes_before = _outcome_count(sweep)
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
        # a launch that ended no job (it failed before any ran: a job folder of another grid refused, a
        # config that does not compose) says nothing of the jobs.jsonl failures of earlier launches
        ran = _outcome_count(sweep) > outcomes_before
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


def _outcome_count(sweep: Path) -> int:
    """Lines in the sweep's jobs.jsonl: one per job that ended (seqbench.hydra_callbacks)."""
    from seqbench.hydra_callbacks import JOBS

    path = Path(sweep) / JOBS
    return len(path.read_bytes().splitlines()) if path.is_file() else 0


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
    parser = argparse.ArgumentParser(prog="python -m seqbench.campaign", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", help="the tuning experiment: tune_frontier or tune_frontier_ptb")
    parser.add_argument("--root", type=Path, default=Path("outputs/sweeps"), help="where the sweeps go")
    parser.add_argument("--jobs", type=int, default=2, help="jobs at a time (one thread each)")
    parser.add_argument("--archive", default=str(DEFAULT_ARCHIVE), help="the folder of the committed archive of "
                        "finished jobs (seqbench.sweep_archive); `none`: keep nothing there")
    parser.add_argument("--sweeps-at-once", type=int, default=1, help="a step's sweeps run side by side, this many "
                        "at a time, each with --jobs jobs (a machine with more cores than a sweep has jobs, or a GPU)")
    parser.add_argument("--steps", default=",".join(Chain.STEPS), help=f"which of {', '.join(Chain.STEPS)}")
    parser.add_argument("--top-families", default="", help="the families of the `top` step (comma-separated; "
                        "default: every family searched)")
    parser.add_argument("--dry-run", action="store_true", help="print each step's sweeps and state and the "
                        "chain's cost so far and to come (seqbench.analysis.campaign_cost), run nothing")
    parser.add_argument("--cost-report", type=Path, help="write the cost table there as cost.md with its "
                        "record.json (implies --dry-run)")
    args = parser.parse_args(argv)
    args.dry_run = args.dry_run or args.cost_report is not None
    chain = Chain(args.experiment, args.root)
    chain.top_families = tuple(f for f in args.top_families.split(",") if f)
    from seqbench.families import compared

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
        from seqbench.analysis.campaign_cost import report
        from seqbench.provenance import command_line

        print(f"\n# cost, per step (core-hours; one job = one core at one thread)\n"
              + report(chain, args.steps.split(","), args.jobs, args.cost_report,
                       command_line("seqbench.campaign", argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
