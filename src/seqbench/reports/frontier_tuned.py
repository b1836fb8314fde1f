"""The frontier after tuning: the verdict from the final cells, and what tuning changed per family.

    python -m seqbench.reports.frontier_tuned tune_frontier_ptb --root outputs/sweeps \\
        --before experiments/figures/frontier-ptb/runs.csv experiments/figures/frontier-ptb-parallel/runs.csv \\
        --report experiments/figures/frontier-tuned-ptb

**After tuning** are the final cells of the chain (`seqbench.protocol.chain.Chain`): the size-selection sweeps,
the seeds and the tier beyond the frontier. A tier's cells count only at the setting that tier trains
with (`seqbench.protocol.transfer_check.setting_at`: the tuned one, or the transfer check's where it moved it), so a run
at a setting the check rejected (PTB's first size sweep trained 15 of them at 1e13) never stands for its
family. The verdict is `seqbench.protocol.verdict`'s: at each tier each family's cell with the most seeds and the
lowest mean selection loss, scored on data selection never saw, a winner only outside every interval.

**Before tuning** are the untuned frontier's committed records, each run's tier rebuilt from its place in
its sweep (`seqbench.reports.frontier_untuned`); **what tuning changed** compares the two sides on the same data
(`seqbench.reports.tuning_effect`).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

from seqbench.families import order
from seqbench.protocol.chain import Chain
from seqbench.protocol.final_cells import (
    SEEDS,
    Experiment,
    flops_text,
    planned_seeds,
    ran_with,
    size_of,
)
from seqbench.protocol.transfer_check import setting_at
from seqbench.protocol.verdict import _loss, cells, selection_loss, verdict
from seqbench.protocol.verdict import table as verdict_table
from seqbench.provenance import command_line, utc_now, write_record
from seqbench.reports.frontier_untuned import before_runs
from seqbench.reports.report import write_report
from seqbench.reports.tuning_effect import (
    changes,
    effect_markdown,
    effect_rows,
    heldout_halves,
    on_whole_split,
    plot_effect,
)
from seqbench.tables import table
from seqbench.training.clocks import CPU_CLOCK, wall_seconds
from seqbench.training.record import read_runs


def verdict_rows(cs: list, tiers: list[float]) -> list[dict]:
    """One row per (tier, family) the verdict reads: the chosen cell's score over seeds, the seeds the
    protocol plans for it (`final_cells.planned_seeds`)
    and the tier's call, for the readers of the record (`seqbench.reports.findings.headline`)."""
    rows = []
    for tier in sorted({c.budget for c in cs}):
        v = verdict(cs, tier)
        call = v.winner or ("tie" if len(v.tied) > 1 else "one family")
        for family in order(v.entries):
            c, i = v.entries[family], v.entries[family].interval
            finite = math.isfinite(i.low)
            rows.append({"budget": f"{tier:.0e}", "family": family, "params_non_embedding": c.params, "seeds": i.n,
                         "seeds_planned": planned_seeds(tier, tiers),
                         "score_mean": f"{i.mean:.6f}", "score_sd": "" if i.sd is None else f"{i.sd:.6f}",
                         "low": f"{i.low:.6f}" if finite else "", "high": f"{i.high:.6f}" if finite else "",
                         "selection_mean": f"{c.selected_by:.6f}", "held_out": c.held_out, "tier_verdict": call,
                         "tied": " ".join(order(v.tied)) if not v.winner else ""})
    return rows


def beyond_table(runs, tiers: list[float]) -> str | None:
    """The tier beyond the frontier's `tiers`, run by run (the issue asks each run's wall time): its seed, its
    selection and held-out losses, its training steps' CPU seconds and its wall time over every segment
    (`seqbench.training.clocks.wall_seconds`: these runs take hours and are resumed across sessions; a resumed run's
    is its fitting to the last validation, without the earlier segments' start-up and the test, and is
    marked). None where no run lies beyond."""
    beyond = [r for r in runs if float(r.metrics["budget/flops"]) > max(tiers)]
    if not beyond:
        return None
    rank = {f: i for i, f in enumerate(order({r.family for r in beyond}))}

    def number(value, digits: int) -> str:
        return "–" if value is None else f"{value:,.{digits}f}"

    def wall(m: dict) -> str:
        # resumed: the process's own wall time is shorter than fitting over every segment (`wall_seconds`)
        resumed = m.get("wall_time_s") is not None and wall_seconds(m) > float(m["wall_time_s"])
        return number(wall_seconds(m), 0) + (" (resumed)" if resumed else "")

    rows = []
    for r in sorted(beyond, key=lambda r: (float(r.metrics["budget/flops"]), rank[r.family],
                                           r.seed is None, r.seed or 0)):
        m = r.metrics
        rows.append([f"{float(m['budget/flops']):.0e}", r.family, r.seed if r.seed is not None else "–",
                     f"{m.get('params_non_embedding') or 0:,}", number(selection_loss(r), 3), number(_loss(m, "test"), 3),
                     number(m.get(CPU_CLOCK), 0), wall(m)])
    return table(["budget (FLOPs)", "family", "seed", "non-emb params", "selection loss", "held-out loss",
                  "training CPU s", "wall s (every segment)"], rows, align="llrrrrrr")


def _write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def final_dirs(chain) -> list[Path]:
    """Every final-cell sweep under the chain's root: the size selection, the seeds, the tier beyond."""
    frontier = Experiment(chain.experiment).frontier
    seeds = sorted(chain.root.glob(f"{frontier}_tuned_seeds_*")) + sorted(chain.root.glob(f"{frontier}_tuned_top_*"))
    return chain.size_dirs() + [d for d in seeds if d.is_dir()]


def at_their_setting(runs, tuned: dict[str, dict], moved: dict[tuple[str, float], dict], highest: float) -> list:
    """The completed runs trained at the setting their tier trains with (`seqbench.protocol.transfer_check.setting_at`: the
    tuned one, or the transfer check's where it moved it); a tier beyond the frontier's `highest` trains with
    the highest tier's (`Chain.top`). A family without a tuned setting keeps every completed run. Failed runs
    are left out here (the verdict reads none) and counted by `after_runs`."""
    def setting(run) -> dict:
        return setting_at(tuned, moved, run.family, min(float(run.metrics["budget/flops"]), highest))

    return [r for r in runs if not r.failed and r.metrics.get("budget/flops") is not None
            and (r.family not in tuned or ran_with(r, setting(r)))]


def after_runs(chain) -> tuple[list, int, int, int]:
    """The final cells' completed runs at the setting their tier trains with; how many completed runs were set
    aside (at another setting); how many runs failed; how many are unfinished (running, or stopped by a signal
    and resumed by the chain's next launch)."""
    dirs = final_dirs(chain)
    if not dirs:
        raise SystemExit(f"no final-cell sweep under {chain.root} for {chain.experiment}: run the chain's sizes step first")

    tuned, moved = chain.settings()
    runs = read_runs(dirs)
    kept = at_their_setting(runs, tuned, moved, max(Experiment(chain.experiment).tiers()))
    return kept, *outcomes(runs, kept)


def outcomes(runs, kept) -> tuple[int, int, int]:
    """Of `runs`, besides the `kept` ones: how many completed runs were set aside, how many failed, and how many
    are unfinished (`Run.unfinished`: a job stopped by SIGTERM or training now is no failure, it resumes)."""
    unfinished = sum(r.unfinished for r in runs)
    failed = sum(r.failed for r in runs) - unfinished
    return len(runs) - failed - unfinished - len(kept), failed, unfinished


def missing(runs, families: list[str], sizes: list[str], tiers: list[float]) -> str:
    """What the final cells lack so far at the frontier's `tiers`, tier by tier: the families with no
    completed run there, and the sizes a family has not run yet (its cell is chosen among those it has).
    The tier beyond trains some families at one size each (`Chain.top`): its row in the verdict shows them."""
    ran: dict[tuple[str, float], set] = {}
    for r in runs:
        ran.setdefault((r.family, float(r.metrics["budget/flops"])), set()).add(size_of(r))
    parts = []
    for tier in tiers:
        absent = [f for f in families if (f, tier) not in ran]
        short = [f"{f} {len(ran[(f, tier)] & set(sizes))} of {len(sizes)} sizes" for f in families
                 if (f, tier) in ran and len(ran[(f, tier)] & set(sizes)) < len(sizes)]
        if absent or short:
            parts.append(f"at {flops_text(tier)}: " + "; ".join(
                ([f"no run yet for {', '.join(absent)}"] if absent else []) + short))
    return ("Not run yet: " + "; ".join(parts) + ".") if parts else "Every family has run every size at every tier of the frontier."


def seed_count(runs, tiers: list[float]) -> str:
    """How many of the cells the verdict reads have the seeds the protocol plans for them (the frontier's
    `tiers` and the tier beyond: `final_cells.planned_seeds`)."""
    cs = cells(runs)
    entries = [c for tier in sorted({c.budget for c in cs}) for c in verdict(cs, tier).entries.values()]
    full = sum(len(c.score) >= planned_seeds(c.budget, tiers) for c in entries)
    beyond = any(c.budget > max(tiers) for c in entries)
    top = planned_seeds(max(tiers) * 10, tiers)  # the protocol's count, read where it is kept
    planned = (f"their {SEEDS} seeds or more ({top} at the tier beyond the frontier)" if beyond and top != SEEDS
               else f"{SEEDS} seeds or more")
    return f"{full} of the {len(entries)} cells the verdict reads have {planned}"


def coverage(runs, experiment) -> str:
    """The verdict's line on what it has read so far: the seeds against the plan, and the frontier tiers'
    missing families and sizes of the grid (`experiment`: `final_cells.Experiment`; the tier beyond counted by its
    plan; the sizes the profile step adds beyond the grid are the scaling page's, `seqbench.reports.frontier_scaling`)."""
    tiers = experiment.tiers()
    return f"{seed_count(runs, tiers)}. {missing(runs, order(experiment.presets), experiment.grid, tiers)}"


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m seqbench.reports.frontier_tuned", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", help="the tuning experiment: tune_frontier or tune_frontier_ptb")
    parser.add_argument("--root", type=Path, default=Path("outputs/sweeps"), help="where the chain's sweeps are")
    parser.add_argument("--before", type=Path, nargs="*", default=[], help="the untuned frontier's runs.csv records")
    parser.add_argument("--report", type=Path, help="write verdict.md, effect.md, effect.csv and the report here")
    args = parser.parse_args(argv)
    started = time.time()
    chain = Chain(args.experiment, args.root)
    runs, set_aside, failed, unfinished = after_runs(chain)
    if not cells(runs):
        raise SystemExit(f"no completed final-cell run with a budget under {args.root} for {args.experiment}: nothing "
                         "to write (the record is left as it was)")
    halves = heldout_halves(args.experiment)
    verdict_text, _ = verdict_table(cells(runs))

    experiment = Experiment(args.experiment)
    read = (f"Read at {utc_now()} from {', '.join(d.name for d in final_dirs(chain))} under {args.root}: "
            f"{len(runs)} completed runs at their tier's setting ({set_aside} at a setting the transfer check rejected set "
            f"aside; {failed} failed{f'; {unfinished} running or stopped, to resume' if unfinished else ''}); "
            f"{coverage(runs, experiment)}")
    text = f"## Verdict after tuning\n\n{verdict_text}\n\n{read}"
    beyond = beyond_table(runs, experiment.tiers())
    if beyond:
        text += (f"\n\n## The tier beyond, run by run\n\nEach run beyond the frontier's tiers, in the order of the "
                 f"families and seeds: its training steps' CPU seconds (one thread) and its wall time over every segment "
                 f"of a run resumed across sessions (marked: its fitting to the last validation, a lower bound), as recorded.\n\n{beyond}")
    if args.before:
        before = [r for path in args.before for r in before_runs(path)]
        data = ("the whole validation tenth (after tuning: the mean of the tested checkpoint's two halves)"
                if halves else "the test split")
        found = changes(before, [on_whole_split(r) for r in runs] if halves else runs)
        text += f"\n\n## What tuning changed, per family and tier\n\n{effect_markdown(found, data)}"
    print(text)
    if args.report:
        args.report.mkdir(parents=True, exist_ok=True)
        (args.report / "verdict.md").write_text(f"# The frontier after tuning: {args.experiment}\n\n{text}\n", encoding="utf-8")
        _write_csv(args.report / "verdict.csv", verdict_rows(cells(runs), experiment.tiers()))
        files = ["verdict.md", "verdict.csv"]
        if args.before:
            _write_csv(args.report / "effect.csv", effect_rows(found))
            plot_effect(found, data, args.report / "effect.png")
            files += ["effect.csv", "effect.png"]
        write_report(runs, args.report, title=f"The frontier after tuning: {args.experiment}")
        write_record(args.report, files + ["report.md", "runs.csv"], command_line("seqbench.reports.frontier_tuned", argv or sys.argv[1:]), started)
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
