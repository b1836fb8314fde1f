"""The frontier after tuning: the verdict from the final cells, and what tuning changed per family.

    python -m seqbench.frontier_tuned tune_frontier_ptb --root outputs/sweeps \\
        --before experiments/figures/frontier-ptb/runs.csv experiments/figures/frontier-ptb-parallel/runs.csv \\
        --report experiments/figures/frontier-tuned-ptb

**After tuning** are the final cells of the chain (`seqbench.chain.Chain`): the size-selection sweeps,
the seeds and the tier beyond the frontier. A tier's cells count only at the setting that tier trains
with (`seqbench.transfer.setting_at`: the tuned one, or the transfer check's where it moved it), so a run
at a setting the check rejected (PTB's first size sweep trained 15 of them at 1e13) never stands for its
family. The verdict is `seqbench.verdict`'s: at each tier each family's cell with the most seeds and the
lowest mean selection loss, scored on data selection never saw, a winner only outside every interval.

**Before tuning** are the untuned frontier's committed records (`experiments/figures/frontier-*/runs.csv`),
written before a run recorded its budget: a run's tier is its place in its sweep, Hydra's product of
family x size x tier with the tier varying fastest (`LAYOUT`, each sweep's tiers from the command in its
record). `before_runs` checks that place against the record: every block of consecutive jobs one tier
list long must hold one family at one size, with the wall time growing with the tier; a record that does
not fit stops the command instead of giving a run another tier's budget.

**What tuning changed** compares the two sides on the same data, each family's cell chosen on each side by
the verdict's rule:
- PTB: the test split's loss of the checkpoint chosen on validation, on both sides;
- Tiny Shakespeare: the old runs selected and scored on the whole validation tenth (it had no held-out
  part); the final cells select on its first half and score on its second (`data.heldout_score`). The
  comparison is on the whole tenth: for a final cell the mean of its tested checkpoint's two halves
  (equal halves, 55,770 characters each; each half's evaluation starts its streams afresh, which the
  whole-tenth pass did once).
The difference is after minus before (negative: tuning helped), with Welch's 95 % interval where both
sides have two seeds or more (scipy's `ttest_ind(equal_var=False)`); with one seed on a side there is no
interval, and the table says so.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from seqbench.report import Run  # what seqbench.verdict.cells reads: name, family, metrics, curve

# The untuned frontier's sweeps, by the name their jobs carry in the records' `run` column: the tiers each
# swept, in the order of its `budget.flops` (the experiment's list, or the tiers given), and its seed. The
# first four from the commands in experiments/figures/frontier-{shakespeare,ptb}/record.json; the parallel
# recurrences' records name only their sweep folders, whose names say the tiers, and their own reports
# (written when runs recorded their budget) hold a verdict table the rebuilt tiers reproduce
# (tests/test_frontier_tuned.py). A one-tier sweep has nothing to check but its name.
LAYOUT: dict[str, tuple[tuple[float, ...], int]] = {
    "frontier_shakespeare_s1234": ((1e11, 1e12, 1e13), 1234),   # experiment=frontier
    "frontier_shakespeare_s2": ((1e11,), 2),                    # budget.flops=1e11 seed=2
    "frontier_ptb_s1234": ((1e12, 3e12, 1e13), 1234),           # experiment=frontier_ptb
    "frontier_ptb_s2": ((1e12,), 2),                            # budget.flops=1e12 seed=2
    "frontier_sh_par_low": ((1e11, 1e12), 1234),                # budget.flops=1e11,1e12
    "frontier_sh_par_low_seed2": ((1e11,), 2),
    "frontier_sh_par_1e13_s": ((1e13,), 1234),                  # size=s budget.flops=1e13
    "frontier_ptb_par_1e12": ((1e12,), 1234),
}


class LayoutError(ValueError):
    """A committed record's jobs do not fall in the blocks its sweep's layout says: its tiers cannot be read."""


def _job(run: str) -> tuple[str, int]:
    sweep, _, job = run.partition("/")
    return sweep, int(job)


def _log(ppl: str) -> float | None:
    return math.log(float(ppl)) if ppl else None  # a failed run's record leaves its perplexities empty


def before_runs(path: Path) -> list[Run]:
    """The runs of an untuned frontier record (`runs.csv` of `seqbench.report`) with their budget tier and
    seed from `LAYOUT`, checked against the record (see the module's docstring)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    by_sweep: dict[str, dict[int, dict]] = {}
    for row in rows:
        sweep, job = _job(row["run"])
        if sweep not in LAYOUT:
            raise LayoutError(f"{path}: no layout for sweep {sweep!r} (seqbench.frontier_tuned.LAYOUT)")
        by_sweep.setdefault(sweep, {})[job] = row
    out = []
    for sweep, jobs in by_sweep.items():
        tiers, seed = LAYOUT[sweep]
        if sorted(jobs) != list(range(len(jobs))) or len(jobs) % len(tiers):
            raise LayoutError(f"{path}: sweep {sweep} has jobs {sorted(jobs)}, not whole blocks of {len(tiers)} tiers")
        for start in range(0, len(jobs), len(tiers)):
            block = [jobs[start + i] for i in range(len(tiers))]
            if len({(r["family"], r["params_non_embedding"]) for r in block}) != 1:
                raise LayoutError(f"{path}: jobs {start}-{start + len(tiers) - 1} of {sweep} are not one family at one "
                                  "size: the tier is not the sweep's fastest axis")
            walls = [float(r["wall_time_s"]) for r in block if r["status"] == "completed" and r["wall_time_s"]]
            if any(b <= a for a, b in zip(walls, walls[1:])):  # a failed job's short time proves nothing
                raise LayoutError(f"{path}: the wall times of {sweep} jobs {start}-{start + len(tiers) - 1} ({walls}) "
                                  f"do not grow with the tiers {tiers}")
            for tier, row in zip(tiers, block):
                metrics = {"status": row["status"], "budget/flops": tier, "seed": seed,
                           "params_non_embedding": int(row["params_non_embedding"]),
                           "val/loss_best": _log(row["best_val_ppl"]), "test/loss": _log(row["test_ppl"])}
                out.append(Run(row["run"], row["family"], metrics))
    return out


def heldout_halves(experiment: str) -> bool:
    """Whether the tuning experiment selects on one half of the validation split and scores on the other."""
    from seqbench.compose import CONF_DIR

    return bool(OmegaConf.select(OmegaConf.load(CONF_DIR / "experiment" / f"{experiment}.yaml"), "data.heldout_score"))


def on_whole_split(run) -> Run:
    """A final run scored as the untuned runs were: on the whole validation split, the mean of its tested
    checkpoint's two equal halves (selection half: `val/loss_best`; score half: `test/loss`)."""
    m = run.metrics
    halves = (m.get("val/loss_best"), m.get("test/loss"))
    whole = sum(halves) / 2 if all(isinstance(h, (int, float)) for h in halves) else None
    return Run(run.name, run.family, {**m, "test/loss": whole})


@dataclass
class Change:
    tier: float
    family: str
    before: object | None  # seqbench.verdict.Cell
    after: object | None

    @property
    def difference(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after.interval.mean - self.before.interval.mean

    @property
    def interval(self) -> tuple[float, float] | None:
        """Welch's 95 % interval of after - before over the seeds; None with one seed on a side."""
        from scipy import stats

        if self.before is None or self.after is None or min(len(self.before.score), len(self.after.score)) < 2:
            return None
        ci = stats.ttest_ind(self.after.score, self.before.score, equal_var=False).confidence_interval(0.95)
        return float(ci.low), float(ci.high)

    @property
    def call(self) -> str:
        if self.difference is None:
            return "–"
        if self.interval is None:
            return "no interval (1 seed)"
        low, high = self.interval
        return "better" if high < 0 else "worse" if low > 0 else "within the seeds' noise"


def changes(before: list, after: list) -> list[Change]:
    """Per tier that either side ran, per family: each side's cell by the verdict's rule."""
    from seqbench.families import order
    from seqbench.verdict import cells, verdict

    old, new = cells(before), cells(after)
    out = []
    for tier in sorted({c.budget for c in old + new}):
        v_old, v_new = verdict(old, tier).entries, verdict(new, tier).entries
        for family in order(set(v_old) | set(v_new)):
            out.append(Change(tier, family, v_old.get(family), v_new.get(family)))
    return out


def _cell(c) -> str:
    if c is None:
        return "–"
    i = c.interval
    sd = f" ± {i.sd:.3f}" if i.sd is not None else ""
    return f"{i.mean:.3f}{sd} ({c.params / 1e6:.2g}M, n={i.n})"


def effect_markdown(found: list[Change], data: str) -> str:
    lines = ["| budget (FLOPs) | family | before tuning | after tuning | after − before | 95 % interval | |",
             "|---|---|---|---|---|---|---|"]
    for ch in found:
        diff = "–" if ch.difference is None else f"{ch.difference:+.3f}"
        ci = "–" if ch.interval is None else f"[{ch.interval[0]:+.3f}, {ch.interval[1]:+.3f}]"
        lines.append(f"| {ch.tier:.0e} | {ch.family} | {_cell(ch.before)} | {_cell(ch.after)} | {diff} | {ci} | {ch.call} |")
    lines += ["", f"Loss in nats per token on {data}, mean ± sd over the seeds of each side's cell (non-embedding "
              "parameters, seeds); each side's cell is the family's size with the most seeds and the lowest mean "
              "selection loss at that tier. After − before < 0: tuning helped. The interval is Welch's over the "
              "two sides' seeds; with one seed on a side there is none: read such a difference against the seed sds "
              "beside it."]
    return "\n".join(lines)


def plot_effect(found: list[Change], data: str, path: Path) -> Path:
    """One panel per family, its loss against the budget before tuning (dashed, open markers) and after
    (solid, filled), mean over seeds with ± sd bars where a side has two seeds or more: the effect table
    as one picture, the panels on one loss scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from seqbench.families import colour, order

    families = order({ch.family for ch in found})
    cols = min(4, len(families))
    rows = -(-len(families) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.4 * rows + 0.6), dpi=100, sharex=True, sharey=True,
                             squeeze=False)
    for i, (ax, family) in enumerate(zip(axes.flat, families)):
        color = colour(family, f"C{i}")
        for side, style, fill in (("before", "--", "none"), ("after", "-", color)):
            points = [(ch.tier, getattr(ch, side).interval) for ch in found
                      if ch.family == family and getattr(ch, side) is not None]
            if points:
                xs, iv = zip(*points)
                ax.errorbar(xs, [i.mean for i in iv], yerr=[i.sd or 0 for i in iv], color=color, linestyle=style,
                            marker="o", markerfacecolor=fill, capsize=2, linewidth=1.2, label=side)
        ax.set_title(family, fontsize=10)
        ax.set_xscale("log")
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes.flat[len(families):]:
        ax.axis("off")
    from matplotlib.lines import Line2D

    keys = [Line2D([], [], color="grey", linestyle="--", marker="o", markerfacecolor="none", label="before tuning"),
            Line2D([], [], color="grey", linestyle="-", marker="o", label="after tuning")]
    fig.legend(handles=keys, loc="upper right", fontsize=8, ncol=2)  # every panel's key, whichever sides it has
    fig.supxlabel("training FLOPs (budget tier)", fontsize=10)
    fig.supylabel(f"loss (nats per token), {data.split(' (')[0]}", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path)
    plt.close(fig)
    return path


def effect_rows(found: list[Change]) -> list[dict]:
    rows = []
    for ch in found:
        row = {"budget": f"{ch.tier:.0e}", "family": ch.family}
        for side, c in (("before", ch.before), ("after", ch.after)):
            i = c.interval if c is not None else None
            row |= {f"{side}_params": c.params if c else "", f"{side}_n": i.n if i else "",
                    f"{side}_mean": f"{i.mean:.4f}" if i else "", f"{side}_sd": f"{i.sd:.4f}" if i and i.sd else ""}
        ci = ch.interval
        row |= {"difference": "" if ch.difference is None else f"{ch.difference:.4f}",
                "low": f"{ci[0]:.4f}" if ci else "", "high": f"{ci[1]:.4f}" if ci else "", "call": ch.call}
        rows.append(row)
    return rows


def verdict_rows(cs: list) -> list[dict]:
    """One row per (tier, family) the verdict reads: the chosen cell's score over seeds and the tier's call,
    for the readers of the record (`seqbench.findings.headline`)."""
    from seqbench.families import order
    from seqbench.verdict import verdict

    rows = []
    for tier in sorted({c.budget for c in cs}):
        v = verdict(cs, tier)
        call = v.winner or ("tie" if len(v.tied) > 1 else "one family")
        for family in order(v.entries):
            c, i = v.entries[family], v.entries[family].interval
            finite = math.isfinite(i.low)
            rows.append({"budget": f"{tier:.0e}", "family": family, "params_non_embedding": c.params, "seeds": i.n,
                         "score_mean": f"{i.mean:.4f}", "score_sd": "" if i.sd is None else f"{i.sd:.4f}",
                         "low": f"{i.low:.4f}" if finite else "", "high": f"{i.high:.4f}" if finite else "",
                         "selection_mean": f"{c.selected_by:.4f}", "held_out": c.held_out, "tier_verdict": call,
                         "tied": " ".join(order(v.tied)) if not v.winner else ""})
    return rows


def _write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def final_dirs(chain) -> list[Path]:
    """Every final-cell sweep under the chain's root: the size selection, the seeds, the tier beyond."""
    from seqbench.final_cells import Experiment

    frontier = Experiment(chain.experiment).frontier
    seeds = sorted(chain.root.glob(f"{frontier}_tuned_seeds_*")) + sorted(chain.root.glob(f"{frontier}_tuned_top_*"))
    return chain.size_dirs() + [d for d in seeds if d.is_dir()]


def at_their_setting(runs, tuned: dict[str, dict], moved: dict[tuple[str, float], dict], highest: float) -> list:
    """The completed runs trained at the setting their tier trains with (`seqbench.transfer.setting_at`: the
    tuned one, or the transfer check's where it moved it); a tier beyond the frontier's `highest` trains with
    the highest tier's (`Chain.top`). A family without a tuned setting keeps every completed run. Failed runs
    are left out here (the verdict reads none) and counted by `after_runs`."""
    from seqbench.final_cells import ran_with
    from seqbench.transfer import setting_at

    def setting(run) -> dict:
        return setting_at(tuned, moved, run.family, min(float(run.metrics["budget/flops"]), highest))

    return [r for r in runs if not r.failed and r.metrics.get("budget/flops") is not None
            and (r.family not in tuned or ran_with(r, setting(r)))]


def after_runs(chain) -> tuple[list, int, int]:
    """The final cells' completed runs at the setting their tier trains with; how many completed runs were set
    aside (at another setting); how many runs failed."""
    from seqbench.report import read_local

    dirs = final_dirs(chain)
    if not dirs:
        raise SystemExit(f"no final-cell sweep under {chain.root} for {chain.experiment}: run the chain's sizes step first")
    from seqbench.final_cells import Experiment

    tuned, moved = chain.settings()
    runs = read_local(dirs)
    kept = at_their_setting(runs, tuned, moved, max(Experiment(chain.experiment).tiers()))
    failed = sum(r.failed for r in runs)
    return kept, len(runs) - failed - len(kept), failed


def missing(runs, families: list[str], sizes: list[str], tiers: list[float]) -> str:
    """What the final cells lack so far, tier by tier: the families with no completed run there, and the
    sizes a family has not run yet (its cell is chosen among those it has)."""
    from seqbench.final_cells import flops_text, size_of

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
    return ("Not run yet: " + "; ".join(parts) + ".") if parts else "Every family has run every size at every tier."


def seed_count(runs) -> str:
    from seqbench.verdict import cells, verdict

    cs = cells(runs)
    entries = [c for tier in sorted({c.budget for c in cs}) for c in verdict(cs, tier).entries.values()]
    full = sum(len(c.score) >= 3 for c in entries)
    return f"{full} of the {len(entries)} cells the verdict reads have 3 seeds or more"


def main(argv: list[str] | None = None) -> str:
    from seqbench.chain import Chain
    from seqbench.provenance import command_line, utc_now
    from seqbench.verdict import cells, table

    parser = argparse.ArgumentParser(prog="python -m seqbench.frontier_tuned", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", help="the tuning experiment: tune_frontier or tune_frontier_ptb")
    parser.add_argument("--root", type=Path, default=Path("outputs/sweeps"), help="where the chain's sweeps are")
    parser.add_argument("--before", type=Path, nargs="*", default=[], help="the untuned frontier's runs.csv records")
    parser.add_argument("--report", type=Path, help="write verdict.md, effect.md, effect.csv and the report here")
    args = parser.parse_args(argv)
    started = time.time()
    chain = Chain(args.experiment, args.root)
    runs, set_aside, failed = after_runs(chain)
    if not cells(runs):
        raise SystemExit(f"no completed final-cell run with a budget under {args.root} for {args.experiment}: nothing "
                         "to write (the record is left as it was)")
    halves = heldout_halves(args.experiment)
    verdict_text, _ = table(cells(runs))
    from seqbench.families import order
    from seqbench.final_cells import Experiment

    experiment = Experiment(args.experiment)
    tiers = sorted({*experiment.tiers(), *(float(r.metrics["budget/flops"]) for r in runs)})
    read = (f"Read at {utc_now()} from {', '.join(d.name for d in final_dirs(chain))} under {args.root}: "
            f"{len(runs)} completed runs at their tier's setting ({set_aside} at a setting the transfer check rejected set "
            f"aside; {failed} failed); "
            f"{seed_count(runs)}. {missing(runs, order(experiment.presets), experiment.sizes, tiers)}")
    text = f"## Verdict after tuning\n\n{verdict_text}\n\n{read}"
    if args.before:
        before = [r for path in args.before for r in before_runs(path)]
        data = ("the whole validation tenth (after tuning: the mean of the tested checkpoint's two halves)"
                if halves else "the test split")
        found = changes(before, [on_whole_split(r) for r in runs] if halves else runs)
        text += f"\n\n## What tuning changed, per family and tier\n\n{effect_markdown(found, data)}"
    print(text)
    if args.report:
        from seqbench.ledger import write_record
        from seqbench.report import write_report

        args.report.mkdir(parents=True, exist_ok=True)
        (args.report / "verdict.md").write_text(f"# The frontier after tuning: {args.experiment}\n\n{text}\n", encoding="utf-8")
        _write_csv(args.report / "verdict.csv", verdict_rows(cells(runs)))
        files = ["verdict.md", "verdict.csv"]
        if args.before:
            _write_csv(args.report / "effect.csv", effect_rows(found))
            plot_effect(found, data, args.report / "effect.png")
            files += ["effect.csv", "effect.png"]
        write_report(runs, args.report, title=f"The frontier after tuning: {args.experiment}")
        write_record(args.report, files + ["report.md", "runs.csv"], command_line("seqbench.frontier_tuned", argv or sys.argv[1:]), started)
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
