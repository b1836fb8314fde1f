"""A frontier verdict that survives seed noise: seed means, 95 % intervals, "tie" where they overlap.

The lower envelope of `seqbench.reports.frontier` takes, at each budget, the lowest point any configuration
of a family reached at any validation. That minimum over many noisy points favours the family with
more of them (more sizes, more budget tiers, more validations), and one lucky seed can decide it.
This module answers the question the tables ask with the rule Melis et al. (2018) argue for:

- a **cell** is (family, non-embedding parameters, budget tier); each of its seeds gives one
  *selection* loss (the run's best validation loss: the checkpoint it tested) and one *score* loss
  (its test loss, on data selection never saw: PTB's test split, Tiny Shakespeare's held-out half
  with `data.heldout_score=true`; the selection loss itself where a run has no test);
- at a budget, each family's entry is its cell *trained to that budget* whose **mean selection
  loss** is lowest (sizes compete on validation, never on the score) among its cells with the most
  seeds: the final cells (`seqbench.protocol.final_cells`) run every size once and give further seeds only to
  the size chosen on that first seed, so a one-seed size beside it was already passed over, and its
  single loss against the chosen cell's mean would be the minimum over noisy points again;
- the entry reports its score as mean ± sample sd and a **95 % t-interval over seeds**
  (mean ± t(0.975, n-1) sd/√n; one seed has no interval);
- the family with the lowest mean score **wins only when its interval lies below every other
  family's interval**; otherwise the verdict is "tie" between the families whose intervals overlap
  the best one's.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from scipy import stats

from seqbench.families import order
from seqbench.tables import table_lines
from seqbench.training.record import run_setting

LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    mean: float
    sd: float | None
    n: int
    low: float   # -inf / +inf where one seed gives no interval
    high: float

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high


def t_interval(values: list[float], level: float = LEVEL) -> Interval:
    """Mean, sample sd and the two-sided t-interval of the mean over `values` (seeds)."""
    n = len(values)
    return interval_of(statistics.fmean(values), statistics.stdev(values) if n > 1 else None, n, level)


def interval_of(mean: float, sd: float | None, n: int, level: float = LEVEL) -> Interval:
    """The same interval from a summary (mean, sample sd, seeds): what a report's "mean ± sd (n=...)" gives."""
    if n < 2 or sd is None:
        return Interval(mean, None, n, -math.inf, math.inf)
    half = stats.t.ppf(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return Interval(mean, sd, n, mean - half, mean + half)


def _loss(metrics: dict, stage: str) -> float | None:
    if metrics.get(f"{stage}/loss") is not None:
        return metrics[f"{stage}/loss"]
    return math.log(metrics[f"{stage}/ppl"]) if metrics.get(f"{stage}/ppl") else None


def selection_loss(run) -> float | None:
    """The run's best validation loss: `val/loss_best` (the tested checkpoint's), else its curve's lowest."""
    if run.metrics.get("val/loss_best") is not None:
        return run.metrics["val/loss_best"]
    curve = [row.get("val/loss") if row.get("val/loss") is not None else
             (math.log(row["val/ppl"]) if row.get("val/ppl") else None) for row in run.curve]
    curve = [v for v in curve if v is not None]
    return min(curve) if curve else _loss(run.metrics, "val")


@dataclass
class Cell:
    family: str
    params: int | None
    budget: float
    selection: list[float] = field(default_factory=list)  # one per seed
    score: list[float] = field(default_factory=list)
    held_out: bool = True  # every seed's score is a test loss, not the selection loss again

    @property
    def selected_by(self) -> float:
        return statistics.fmean(self.selection)

    @property
    def interval(self) -> Interval:
        return t_interval(self.score)


def cells(runs) -> list[Cell]:
    """Completed runs with a FLOPs budget grouped into (family, size, budget) cells, seeds pooled; runs
    at two tuned settings (`seqbench.training.record.run_setting`) are two cells of the same size."""
    out: dict[tuple, Cell] = {}
    for run in runs:
        budget = run.metrics.get("budget/flops")
        select = selection_loss(run)
        if run.failed or not budget or select is None:
            continue
        key = (run.family, run.metrics.get("params_non_embedding"), float(budget), run_setting(run.metrics))
        cell = out.setdefault(key, Cell(*key[:3]))
        score = _loss(run.metrics, "test")
        cell.selection.append(select)
        cell.score.append(score if score is not None else select)
        cell.held_out &= score is not None
    return list(out.values())


@dataclass
class Verdict:
    budget: float
    entries: dict[str, Cell]  # family -> its cell selected at this budget
    winner: str | None        # None: a tie (or nothing ran)
    tied: list[str]           # the families whose intervals overlap the best one's (winner alone if won)


def verdict(cs: list[Cell], budget: float) -> Verdict:
    """Each family's cell at `budget` chosen on mean selection loss; the winner, or the tie."""
    def rank(c: Cell) -> tuple:
        return -len(c.selection), c.selected_by  # the most seeds first (the chosen cell), then validation

    entries: dict[str, Cell] = {}
    for c in cs:
        if c.budget == budget and (c.family not in entries or rank(c) < rank(entries[c.family])):
            entries[c.family] = c
    winner, tied = winner_or_tie({f: c.interval for f, c in entries.items()})
    return Verdict(budget, entries, winner, tied)


def winner_or_tie(intervals: dict[str, Interval], higher_is_better: bool = False) -> tuple[str | None, list[str]]:
    """The rule on named intervals, for any score (a loss, or BLEU with `higher_is_better`): the best mean
    wins only when its interval overlaps no other's. Returns (winner or None, the families whose intervals
    overlap the best one's, the best included: the winner alone when it won, the tie otherwise)."""
    if not intervals:
        return None, []
    best = (max if higher_is_better else min)(intervals, key=lambda f: intervals[f].mean)
    tied = [f for f in intervals if f == best or intervals[f].overlaps(intervals[best])]
    return (best if len(intervals) > 1 and tied == [best] else None), tied


def _cell_text(c: Cell | None) -> str:
    if c is None:
        return "–"
    i = c.interval
    sd = f" ± {i.sd:.3f}" if i.sd is not None else ""
    ci = f" [{i.low:.3f}, {i.high:.3f}]" if math.isfinite(i.low) else " [no interval: 1 seed]"
    size = f"{c.params / 1e6:.2g}M" if c.params else "?"
    return f"{i.mean:.3f}{sd}{ci} ({size}, n={i.n}{'' if c.held_out else ', no test'})"


def table(cs: list[Cell], budgets: list[float] | None = None) -> tuple[str, list[Verdict]]:
    """Markdown: per budget tier each family's selected cell (score mean ± sd [95 % interval]) and the
    verdict. Returns (text, verdicts)."""
    budgets = budgets or sorted({c.budget for c in cs})
    verdicts = [verdict(cs, b) for b in budgets]
    names = order({c.family for c in cs})
    lines = table_lines(["budget (FLOPs)", *names, "verdict"], (
        [f"{v.budget:.1e}", *(_cell_text(v.entries.get(f)) for f in names),
         v.winner or (f"tie ({', '.join(order(v.tied))})" if len(v.tied) > 1 else "–")] for v in verdicts))
    lines += ["", "Each family's configuration trained to the budget with the lowest mean validation loss over "
              "seeds, among those with the most seeds (sizes are chosen on validation); its score is the test loss of the tested checkpoint "
              "(\"no test\": the validation loss again) in nats per token: mean ± sd [95 % t-interval] "
              "(non-embedding parameters, seeds). A winner is named only where its interval lies below every "
              "other family's; otherwise the families whose intervals overlap the best one's tie."]
    return "\n".join(lines), verdicts
