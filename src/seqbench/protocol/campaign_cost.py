"""What the tuning chain has cost and what the rest will cost, from its recorded runs:
`python -m seqbench.protocol.campaign <experiment> --dry-run` (`--cost-report <dir>` writes it as `cost.md`).

The protocol page's budget was typed from older pages' wall times and the measured searches proved it
about 2x low; the plan and its cuts need the runs' own numbers. Per step of the chain (`Chain.STEPS`):

- **runs planned:** where the step's sweeps can be computed now (what they read has run), each sweep's
  overrides expanded into its jobs as Hydra's basic sweeper does: the experiment's own
  `hydra.sweeper.params` and the command line's axes (which win), their cartesian product
  (`tuning_trials.sweep_axes`). Where not, the protocol's rule, with tiers, sizes and families read
  from `final_cells.Experiment` (its presets are the registry's compared families): sizes = family x
  size x tier; seeds = family x tier x 2; transfer = family x 5 settings (3 rates, 2 tokens
  neighbours) at every tier but the searched one (a rate the check adds beyond a best on its edge,
  `transfer.rate_extensions`, is counted once its sweep is known); top = the top families x `final_cells.TOP_SEEDS` seeds at 10 x the highest tier. The edges step before the
  search has finished is computed from the search so far (provisional: a best may still move).
- **finished:** jobs of the step's sweep directories whose record says `completed` (a diverged
  run completed too: it ran its budget). A failed job is launched again by the campaign, so it stays
  remaining and its time is not counted; a running job's record says `running`. A sweep marked
  `campaign.done` has nothing remaining, even where it gave up on failed jobs.
- **measured core-hours:** the finished jobs' summed seconds (one job = one core at one thread): the
  CPU seconds of a one-thread CPU run that recorded them, its wall seconds otherwise
  (`seqbench.training.clocks.run_seconds`: the chains share their cores and are paused while a suite runs).
- **estimated core-hours** of each remaining job: linear in its FLOPs budget, seconds per FLOP taken
  from the same family's finished runs at the tuned setting (the search's trials at the family's
  tuned tokens per step, `tuning.per_family`, and every transfer, sizes, seeds and top run) at the
  tier nearest the job's (in log distance); for the seeds and the tier beyond, which train the size the
  size selection chose, that size's runs alone at a tier where it is chosen and timed. The measured time holds a part that does not grow
  with the FLOPs (start-up, data loading, the validations), and the model scales it with them: a tier
  above the measured one is over-estimated by that part, a tier below under-estimated, and a run that
  validates more often than the measured ones (the final cells against the search's trials) costs
  more than its estimate. Once the transfer and size runs exist at the higher tiers, those tiers are
  estimated from their own runs. A remaining search trial is costed at the tuned tokens per step, not
  its own. A family with no such run has no estimate: the table names it, never a silent zero.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from seqbench.protocol.chain import DONE, Job, searched_at, sweep_jobs
from seqbench.protocol.final_cells import TOP_SEEDS, Experiment, chosen_sizes, size_of
from seqbench.protocol.scaling_laws import MIN_SIZES
from seqbench.protocol.transfer_check import setting_at
from seqbench.protocol.tuning import per_family, summary
from seqbench.provenance import utc_now, write_record
from seqbench.tables import table_lines
from seqbench.training.clocks import run_seconds
from seqbench.training.record import job_dirs, read_runs


def rule_jobs(step: str, experiment, families: list[str], top_families: tuple[str, ...],
              searched: float) -> list[Job]:
    """The protocol's count for a step whose sweeps depend on results not there yet."""
    tiers = experiment.tiers()
    others = [t for t in tiers if t != searched]
    # the profile step's count is its floor: each cell grown from the grid to `MIN_SIZES` sizes (a valley
    # that runs off its grid needs more; one that would repeat its text, fewer)
    grown = max(MIN_SIZES - len(experiment.grid), 0)
    per_step = {"sizes": [(f, t) for f in families for _ in experiment.grid for t in tiers],
                "profiles": [(f, t) for f in families for t in tiers for _ in range(grown)],
                "seeds": [(f, t) for f in families for t in tiers for _ in range(2)],
                "transfer": [(f, t) for f in families for t in others for _ in range(5)],
                "top": [(f, max(tiers) * 10) for f in families if not top_families or f in top_families] * TOP_SEEDS}
    return per_step[step]


@dataclass
class Row:
    step: str
    basis: str                               # how the runs were counted
    planned: int = 0
    finished: int = 0
    remaining: int = 0
    measured_s: float = 0.0
    estimated_s: float = 0.0
    unmeasured: Counter = field(default_factory=Counter)  # family -> remaining runs with no estimate


def finished_runs(dirs: list[Path]) -> list:
    """The completed runs (`seqbench.training.record.Run`) of these sweep directories; none for a directory with none."""
    return [r for d in dirs if job_dirs(d) for r in read_runs([d]) if not r.failed]


Rates = dict[str, dict[float, tuple[float, float]]]  # family -> tier -> (summed seconds, summed FLOPs)


def rates(runs, tuned: dict[str, dict], search_names: set[str],
          chosen: dict[tuple[str, float], str] | None = None) -> Rates:
    """What each family's runs at the tuned setting cost, per tier: of the search's trials (sweeps named
    in `search_names`) only those at the family's tuned tokens per step, every run of the later steps.
    `chosen` ((family, tier) -> the size chosen there, `final_cells.chosen_sizes`): at a tier where the
    family's size is chosen and a run of it was timed, only that size's runs count. A family's sizes
    differ several-fold in seconds per FLOP (the small ones see more tokens and take more steps for the
    same FLOPs: Tiny Shakespeare's LSTM at 1e13, 13 minutes at size s against 3 at l), and the seeds and
    the tier beyond train the chosen size alone; the other steps train every size, so they are costed
    without `chosen`."""

    out: Rates = {}
    for r in runs:
        m = r.metrics
        seconds = run_seconds(m)
        if seconds is None or not m.get("budget/flops"):
            continue
        size = (chosen or {}).get((r.family, float(m["budget/flops"])))
        if size is not None and size_of(r) != size:
            continue
        used = None if m.get("tune/tokens_per_step") is None else round(m["tune/tokens_per_step"])
        if r.path.parent.name in search_names and (r.family not in tuned
                                                   or used != tuned[r.family].get("tokens_per_step")):
            continue
        tiers = out.setdefault(r.family, {})
        spent, flops = tiers.get(float(m["budget/flops"]), (0.0, 0.0))
        tiers[float(m["budget/flops"])] = (spent + seconds, flops + float(m["budget/flops"]))
    return out


def chosen_rates(pooled: Rates, runs, tuned: dict[str, dict], search_names: set[str],
                 chosen: dict[tuple[str, float], str]) -> Rates:
    """`rates` of the chosen sizes, for the steps that train them alone (seeds, the tier beyond), over
    `pooled` (`rates` without `chosen`): a tier whose chosen size has no timed run keeps the pooled rate,
    never vanishing from the estimate."""
    only = rates(runs, tuned, search_names, chosen)
    return {family: {**tiers, **only.get(family, {})} for family, tiers in pooled.items()}


def estimate_s(job: Job, measured: Rates) -> float | None:
    """Seconds of one job: seconds per FLOP of its family's runs at the tier nearest its budget (the
    higher one where two are as near), times its budget; None where the family has no run."""
    family, budget = job
    tiers = measured.get(family)
    if not tiers:
        return None
    nearest = min(tiers, key=lambda t: (abs(math.log(t / budget)), -t))
    spent, flops = tiers[nearest]
    return spent / flops * budget


def row(step: str, basis: str, jobs: list[Job], open_jobs: list[Job], runs, open_runs, measured) -> Row:
    """`jobs`: all the step plans; `open_jobs`: those of its sweeps not marked done, less `open_runs` (the
    finished runs in those sweeps), are what remains."""
    out = Row(step, basis, planned=len(jobs), finished=len(runs),
              measured_s=sum(run_seconds(r.metrics) or 0.0 for r in runs))
    ran = Counter((r.family, float(r.metrics.get("budget/flops") or 0)) for r in open_runs)
    remaining = Counter(open_jobs) - ran
    out.remaining = sum(remaining.values())
    for job, n in remaining.items():
        seconds = estimate_s(job, measured)
        if seconds is None:
            out.unmeasured[job[0]] += n
        else:
            out.estimated_s += seconds * n
    return out


def _h(seconds: float) -> str:
    return f"{seconds / 3600:,.2f}"


def markdown(rows: list[Row], jobs_at_once: int, read_at: str, root: Path) -> str:
    head = ["step", "runs planned", "finished", "remaining", "measured core-h", "estimated core-h (remaining)",
            "no measured run (remaining runs)", "counted by"]
    measured, estimated = sum(r.measured_s for r in rows), sum(r.estimated_s for r in rows)
    unmeasured = sum(sum(r.unmeasured.values()) for r in rows)
    lines = table_lines(head, [
        *([r.step, r.planned, r.finished, r.remaining, _h(r.measured_s), _h(r.estimated_s),
           ", ".join(f"{f} ({n})" for f, n in r.unmeasured.items()) or "–", r.basis] for r in rows),
        ["**total**", sum(r.planned for r in rows), sum(r.finished for r in rows), sum(r.remaining for r in rows),
         _h(measured), _h(estimated), unmeasured or "–", None]])
    lacking = f", not counting {unmeasured} remaining runs of families with no measured run" if unmeasured else ""
    return "\n".join(lines + [
        "",
        f"Cost read at {read_at} from {root}: measured + estimated = {_h(measured + estimated)} core-hours; "
        f"the remaining {_h(estimated)} core-hours take about {estimated / 3600 / jobs_at_once:,.1f} h of wall "
        f"clock at {jobs_at_once} job(s) at a time{lacking}.",
        "",
        "Cost measured: the completed jobs' summed seconds of one core (`cpu_time_s` for one-thread CPU runs, "
        "`wall_time_s` for those run before it was recorded and for any other); a failed job's time is "
        "not counted (it runs again), and a job resumed after a stop counts its training steps over every "
        "segment (`seqbench.training.clocks.run_seconds`).",
        "",
        "Cost estimated: each remaining run's FLOPs budget x its family's seconds per FLOP, measured on its runs "
        "at the tuned setting at the tier nearest the run's (for the seeds and the tier beyond, on the chosen size's "
        "runs alone where it has them). Linear, with no fixed cost: the measured runs' "
        "start-up and validations are scaled with the FLOPs, so a tier above the measured one is over-estimated "
        "and one below under-estimated; runs that validate more often than the measured ones (the final cells) "
        "cost more than this; a remaining search trial is costed at the tuned tokens per step."])


def _sweep_dirs(chain, frontier: str) -> dict[str, list[Path]]:
    """Each step's sweep directories as they stand under the chain's root, by the names the chain gives
    them (a name ending in `_` is a prefix: one sweep per tier or family)."""
    exp = chain.experiment
    names = {"search": exp, "untuned": f"{exp}_untuned", "edges": f"{exp}_edge_", "transfer": f"{exp}_transfer_",
             "sizes": f"{frontier}_tuned_sizes", "seeds": f"{frontier}_tuned_seeds_",
             "top": f"{frontier}_tuned_top_"}
    existing = sorted(p for p in chain.root.iterdir() if p.is_dir()) if chain.root.is_dir() else []
    out = {step: [p for p in existing if p.name == name or (name.endswith("_") and p.name.startswith(name))]
           for step, name in names.items()}
    # the sizes' per-tier sweeps too (`<frontier>_tuned_sizes_<tier>`, where the transfer check moved a setting);
    # the profile step's (`<frontier>_tuned_sizes_profile_*`) are its own
    profile = names["sizes"] + "_profile_"
    out["sizes"] += [p for p in existing if p.name.startswith(names["sizes"] + "_") and not p.name.startswith(profile)]
    out["profiles"] = [p for p in existing if p.name.startswith(profile)]
    return out


def rows(chain, steps: list[str]) -> list[Row]:
    """One row per step of `steps`, read from the sweeps under `chain.root` (`seqbench.protocol.chain.Chain`)."""

    experiment = Experiment(chain.experiment)

    def done(name: str) -> bool:
        return (chain.root / name / DONE).is_file()

    dirs = _sweep_dirs(chain, experiment.frontier)
    runs = {step: finished_runs(d) for step, d in dirs.items()}
    tuned = per_family(summary(runs["search"] + runs["edges"]))
    timed, search_names = [r for step, rs in runs.items() if step != "untuned" for r in rs], {d.name for d in dirs["search"] + dirs["edges"]}
    pooled = rates(timed, tuned, search_names)
    # the size each tier's seeds and top runs train, chosen as `Chain.top` chooses it: among the size runs at
    # the setting that tier trains with (the transfer check's where it moved it); before the search is done
    # no size has trained, and every step keeps the pooled rate
    chosen = {}
    if done(chain.experiment):
        tuned_at, moved = chain.settings()
        chosen = chosen_sizes(runs["sizes"] + runs["profiles"], lambda f, t: setting_at(tuned_at, moved, f, t) if f in tuned_at else None)
    by_size = chosen_rates(pooled, timed, tuned, search_names, chosen)
    searched = (chain.root / chain.experiment).is_dir()
    edges = chain.edges() if searched else []  # from the search so far where it has not finished
    out = []
    for step in steps:
        # the edges are counted from the search so far, before it is done; the later steps when the chain
        # can compute them (`Chain.ready`), else by the protocol's rule
        if step in ("search", "untuned") or (step == "edges" and searched) or (step != "edges" and chain.ready(step)):
            jobs = {name: sweep_jobs(o) for name, o in (edges if step == "edges" else getattr(chain, step)())}
            everything = [j for js in jobs.values() for j in js]
            still_open = [j for name, js in jobs.items() if not done(name) for j in js]
            provisional = step == "edges" and not done(chain.experiment)
            basis = "sweeps, provisional (the search so far)" if provisional else "its sweeps"
        elif step == "edges":  # the extension depends on where the bests lie: nothing to count yet
            everything = still_open = []
            basis = "not known before the search runs"
        else:
            everything = still_open = rule_jobs(step, experiment, list(experiment.presets), chain.top_families,
                                                searched_at(chain.experiment)[0])
            basis = "the protocol's rule"
        open_runs = [r for r in runs[step] if not done(r.path.parent.name)]
        out.append(row(step, basis, everything, still_open, runs[step], open_runs,
                       by_size if step in ("seeds", "top") else pooled))
    return out


def report(chain, steps: list[str], jobs_at_once: int, folder: Path | None, command: str) -> str:
    """The cost table (printed by the dry run); with `folder`, written there as `cost.md` beside its
    ledger record (`record.json`: command, commit, machine, date)."""
    started = time.time()
    text = markdown(rows(chain, steps), jobs_at_once, utc_now(), chain.root)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cost.md").write_text(f"# The tuning chain's cost: {chain.experiment}\n\n{text}\n",
                                        encoding="utf-8")
        write_record(folder, ["cost.md"], command, started)
    return text
