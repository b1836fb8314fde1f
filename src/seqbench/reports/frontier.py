"""The compute-efficient frontier: validation loss against training FLOPs, per family, from run histories.

A ranking at one size and one budget may be the budget's, not the families' (Kaplan et al. 2020,
Fig. 7: LSTMs ahead at small compute, Transformers past it). `experiment=frontier` trains each family
at several sizes to the same FLOPs budgets, validating every budget/10 FLOPs; `seqbench.reports.report` calls
this module when the runs log `train/flops` (`seqbench.callbacks.LearningCurve`).

- A **configuration** is (family, non-embedding parameters, budget); its seeds are averaged point by
  point (their validations fall at the same steps), the sample standard deviation kept as the spread.
- A family's **frontier** (lower envelope) at C FLOPs is the lowest mean validation loss any of its
  configurations reached with at most C training FLOPs — at any validation, of any size or budget
  tier: a run could have been stopped there. It is a non-increasing step function of C.
- The **tables** read each frontier at the budgets (the runs' `budget.flops` tiers by default), with a
  tolerance of `TOLERANCE` above the budget because a run's steps are rounded to whole validation
  intervals (`seqbench.training.budget`); the winner is the family with the lowest loss; where the winner
  changes between two budgets, the **crossover** is the first validation FLOPs at which the new
  winner's frontier is below the old one's. A second table does the same over training time (the
  training seconds of each validation, seeds averaged), at decades of seconds (`--time-budgets`): CPU
  seconds where every run trained on one CPU thread and recorded them, wall-clock seconds for every
  run otherwise (`seqbench.training.clocks` says why; one clock for the whole table).

The envelope shows the curves' shape; the **verdict** (who wins at a budget) is `seqbench.protocol.verdict`'s:
seed means of the cells trained to that budget, chosen on validation, scored on held-out data, a
winner only outside the 95 % intervals. The report puts that table first.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from seqbench.families import colour
from seqbench.protocol import verdict
from seqbench.tables import table_lines
from seqbench.training.clocks import WALL_CLOCK, clock_name, common_clock
from seqbench.training.record import run_setting, run_setting_text

TOLERANCE = 0.05  # a run spends its budget to within evals/2 steps: count points up to 5 % above it


def config_label(family: str, params: float | None, budget: float | None) -> str:
    """How a (family, size, budget) point is named in tables and legends: "lstm 0.2M @ 1e+12"; the
    frontier table here and the report's per-configuration rows (seqbench.reports.report) share it."""
    return family + (f" {params / 1e6:.2g}M" if params else "") + (f" @ {budget:.0e}" if budget else "")


@dataclass
class Config:
    """One (family, size, budget) point of the sweep: its seeds' mean curve."""
    family: str
    params: int | None
    budget: float | None
    points: list[dict] = field(default_factory=list)  # {"flops", "time", "loss", "sd", "n"} per validation
    clock: str = WALL_CLOCK  # the curve key "time" was read from: the same for every configuration of a table
    setting: str = ""  # the tuned setting, where runs of the same size and budget trained at several

    @property
    def label(self) -> str:
        return config_label(self.family, self.params, self.budget) + (f" ({self.setting})" if self.setting else "")


def loss_of(row: dict) -> float | None:
    if row.get("val/loss") is not None:
        return row["val/loss"]
    return math.log(row["val/ppl"]) if row.get("val/ppl") else None


def configs(runs) -> list[Config]:
    """Seeds grouped into configurations, their curves averaged per validation (only runs with FLOPs)."""
    grouped: dict[tuple, list] = {}
    for run in runs:
        if run.failed or not any(row.get("train/flops") is not None for row in run.curve):
            continue
        key = (run.family, run.metrics.get("params_non_embedding"), run.metrics.get("budget/flops"), run_setting(run.metrics))
        grouped.setdefault(key, []).append(run)
    clock = common_clock([(r.metrics.get("device"), r.curve) for rs in grouped.values() for r in rs])
    shared = Counter(key[:3] for key in grouped)  # a size and budget trained at more than one setting
    out = []
    for (family, params, budget, setting), rs in sorted(grouped.items(), key=lambda kv: tuple(str(k) for k in kv[0])):
        curves = [[row for row in r.curve if row.get("train/flops") is not None and loss_of(row) is not None]
                  for r in rs]
        points = []
        for i in range(min(len(c) for c in curves)):  # a seed cut short ends the mean there
            losses = [loss_of(c[i]) for c in curves]
            times = [c[i].get(clock) for c in curves]
            times = [t for t in times if t is not None]
            points.append({"flops": statistics.fmean(c[i]["train/flops"] for c in curves),
                           "time": statistics.fmean(times) if times else None,
                           "loss": statistics.fmean(losses),
                           "sd": statistics.stdev(losses) if len(losses) > 1 else None, "n": len(losses)})
        named = run_setting_text(setting) if shared[(family, params, budget)] > 1 else ""
        out.append(Config(family, params, budget, points, clock, named))
    return out


def envelope(cfgs: list[Config], x: str = "flops") -> list[tuple[float, float, Config, dict]]:
    """The lower envelope of the configurations' curves: (x, loss, config, point) where the best loss
    reached with at most x improves, in increasing x."""
    points = sorted(((p[x], p["loss"], c, p) for c in cfgs for p in c.points if p.get(x) is not None),
                    key=lambda t: (t[0], t[1]))
    out: list[tuple[float, float, Config, dict]] = []
    for item in points:
        if not out or item[1] < out[-1][1]:
            out.append(item)
    return out


def best_at(env: list[tuple], budget: float) -> tuple[float, Config, dict] | None:
    """(loss, config, point) of the frontier at `budget` FLOPs; None if nothing was validated by then."""
    reached = [e for e in env if e[0] <= budget * (1 + TOLERANCE)]
    return (reached[-1][1], reached[-1][2], reached[-1][3]) if reached else None


def by_family(cfgs: list[Config]) -> dict[str, list[Config]]:
    out: dict[str, list[Config]] = {}
    for c in cfgs:
        out.setdefault(c.family, []).append(c)
    return out


def decades(cfgs: list[Config], x: str = "flops") -> list[float]:
    """The powers of ten between the smallest and the largest x any validation reached, and that largest
    x itself: where a table over x reads the frontiers."""
    values = [p[x] for c in cfgs for p in c.points if p.get(x)]
    if not values:
        return []
    top, low = math.floor(math.log10(max(values))), math.log10(min(values))
    out = [10.0**k for k in range(math.ceil(low), top + 1)]
    return out + ([max(values)] if not out or max(values) > out[-1] * (1 + TOLERANCE) else [])


def default_budgets(cfgs: list[Config]) -> list[float]:
    """The budget tiers the runs were trained to, else decades up to the largest count reached."""
    tiers = sorted({c.budget for c in cfgs if c.budget})
    return tiers or decades(cfgs, "flops")


def winners(envs: dict[str, list[tuple]], budgets: list[float]) -> list[tuple[float, dict[str, tuple], str | None]]:
    """Per budget: each family's (loss, config, point) and the family with the lowest loss."""
    rows = []
    for b in budgets:
        best = {f: r for f, env in envs.items() if (r := best_at(env, b)) is not None}
        rows.append((b, best, min(best, key=lambda f: best[f][0]) if best else None))
    return rows


def crossovers(envs: dict[str, list[tuple]], rows: list[tuple]) -> list[tuple[str, str, float]]:
    """(old winner, new winner, FLOPs) wherever the winner changes between two consecutive budgets:
    the first validation FLOPs, between them, at which the new winner's frontier is below the old's."""
    out = []
    for (b0, _, old), (b1, _, new) in zip(rows, rows[1:]):
        if old is None or new is None or old == new:
            continue
        grid = sorted({e[0] for f in (old, new) for e in envs[f] if b0 < e[0] <= b1 * (1 + TOLERANCE)})
        at = next((x for x in grid if (n := best_at(envs[new], x)) and (o := best_at(envs[old], x))
                   and n[0] < o[0]), b1)
        out.append((old, new, at))
    return out


def _cell(result: tuple | None) -> str:
    if result is None:
        return "–"
    loss, cfg, point = result
    sd = f" ± {point['sd']:.3f}" if point.get("sd") is not None else ""
    size = f"{cfg.params / 1e6:.2g}M" if cfg.params else "?"
    return f"{loss:.3f}{sd} ({size}, n={point['n']})"


def _seconds(v: float) -> str:
    return f"{v:,.0f}" if v >= 10 else f"{v:.2g}"


# x of a table: its column head, how a budget is written, and the unit of a crossover
AXES = {"flops": ("budget (FLOPs)", "{:.1e}".format, lambda v: f"{v:.2e} training FLOPs"),
        "time": ("training time (s)", _seconds, lambda v: f"{_seconds(v)} s of training (validation excluded)")}


def table(cfgs: list[Config], budgets: list[float] | None = None, x: str = "flops") -> tuple[str, list, list]:
    """Markdown: per budget (of FLOPs, or of training seconds with x="time") each family's best
    validation loss (its size, seeds and spread) and the winner; then the crossovers. Returns (text,
    rows, crossovers)."""
    head, fmt, unit = AXES[x]
    fams = by_family(cfgs)
    envs = {f: envelope(cs, x) for f, cs in fams.items()}
    budgets = budgets or (default_budgets(cfgs) if x == "flops" else decades(cfgs, x))
    rows = winners(envs, budgets)
    names = sorted(fams)
    lines = table_lines([head, *names, "winner"], ([fmt(b), *(_cell(best.get(f)) for f in names), win or "–"]
                                                   for b, best, win in rows))
    cross = crossovers(envs, rows)
    lines.append("")
    if cross:
        lines += [f"Crossover: {new} overtakes {old} at ≈ {unit(at)}." for old, new, at in cross]
    elif rows:
        lines.append("No crossover: the same family wins at every budget.")
    lines.append("")
    lines.append("Validation loss in nats per token (mean ± sd over seeds, n seeds) of the family's best "
                 "configuration within the budget (+5 %), its non-embedding parameters in brackets."
                 + (f" Training time: {clock_name(cfgs[0].clock if cfgs else WALL_CLOCK)}." if x == "time" else ""))
    return "\n".join(lines), rows, cross


def plot(cfgs: list[Config], x: str, xlabel: str, path: Path) -> Path:
    """Every configuration's curve (thin, error bars where seeds differ) and each family's frontier in bold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    fig, ax = plt.subplots(figsize=(7.2, 4.6), dpi=100)
    for i, (family, cs) in enumerate(sorted(by_family(cfgs).items())):
        color = colour(family, f"C{i}")
        for c in cs:
            pts = [p for p in c.points if p.get(x) is not None]
            if pts:
                ax.errorbar([p[x] for p in pts], [p["loss"] for p in pts], yerr=[p["sd"] or 0.0 for p in pts],
                            color=color, alpha=0.35, linewidth=0.8, marker=".", markersize=3, capsize=1.5)
        env = envelope(cs, x)
        if env:
            xs, ys = [e[0] for e in env], [e[1] for e in env]
            xs.append(max(p[x] for c in cs for p in c.points if p.get(x) is not None))
            ys.append(ys[-1])
            ax.step(xs, ys, where="post", color=color, linewidth=2.6, label=f"{family} (frontier)")
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("validation loss (nats per token)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def section(runs, out: Path, budgets: list[float] | None = None, time_budgets: list[float] | None = None) -> dict | None:
    """The report's frontier section: the table over FLOPs budgets and the same over training time
    (seconds: by default the decades the runs span), the two PNGs; None when no run counted FLOPs."""
    cfgs = configs(runs)
    if not cfgs:
        return None
    verdict_text, verdicts = verdict.table(verdict.cells(runs), budgets)
    text, rows, cross = table(cfgs, budgets)
    time_text, time_rows, _ = table(cfgs, time_budgets, x="time")
    pngs = {"loss_vs_flops": plot(cfgs, "flops", "training FLOPs", out / "loss_vs_flops.png"),
            "loss_vs_time": plot(cfgs, "time", "training time (s, validation excluded)", out / "loss_vs_time.png")}
    md = ["## Compute-efficient frontier", "", "### Verdict: seed means and 95 % intervals", "", verdict_text, "",
          "### Lower envelope over every validation (the curves' shape, not a verdict)", "",
          text, "", "![loss_vs_flops](loss_vs_flops.png)", "",
          "### The same runs against training time", "",
          "Seconds depend on the machine (the runs' `device` and the page say which), and wall-clock seconds "
          "on its load too; the FLOPs table depends on neither.", "", time_text, "", "![loss_vs_time](loss_vs_time.png)"]
    return {"markdown": "\n".join(md), "verdict_table": verdict_text, "verdicts": verdicts,
            "table": text, "rows": rows, "crossovers": cross, "pngs": pngs,
            "time_table": time_text, "time_rows": time_rows}
