"""Each family's search: its grid, its best setting, whether that lies on the grid's edge, and how it
compares with the untuned recipe (experiments/tuning-protocol.md).

A family's search is every trial of it at one corpus, size and budget, over all the sweep
directories given (the base grid and the extensions beyond its edges merge into one grid). The grid's
axes are the points planned (`tuning_trials.planned`) and the points seen, so a search still running
knows its edges before it reaches them.

- **Best:** the completed trial with the lowest selection loss (`val/loss_best`); diverged and failed
  trials are never picked, running ones are not counted as anything but running. A probe's search over
  several gaps (`data.T`, experiment=long_range_lr) picks the setting with the lowest mean loss over them.
- **No rate learned:** a probe's search where no completed trial, at any rate and gap, came `LEARNED`
  (5 %) below the loss of a model that learned nothing (`val/baseline_loss`) has no best: the lowest of
  losses at chance would pick a rate from noise. The family keeps its recipe's rate, and the record says so.
- **Edge:** the best lies on an edge when its rate is the grid's lowest or highest, or its tokens per
  step the fewest or most; an axis with a single value was not searched and has no edge. The protocol's
  rule: if any family's best lies on an edge, the grid is extended beyond it for every family.
- **Untuned:** the same family's completed runs of its own recipe (lr x 1, its own batch and schedule;
  a run of the baseline sweep that set any of them is left out) at the same corpus, size and budget,
  selected on the same data; the difference is tuned minus
  untuned, so a negative one is the search's gain.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

from seqbench.families import order
from seqbench.protocol.tuning_trials import Point, Trial, point

Key = tuple[str, str, str | None, float | None]  # corpus, family, size, budget


def key_of(trial: Trial) -> Key:
    return trial.corpus, trial.family, trial.size, trial.budget


@dataclass
class Search:
    corpus: str
    family: str
    size: str | None
    budget: float | None
    trials: list[Trial] = field(default_factory=list)
    planned: set[Point] = field(default_factory=set)
    untuned: list[Trial] = field(default_factory=list)  # the recipe's own runs, same data and protocol

    def count(self, status: str) -> int:
        return sum(t.status == status for t in self.trials)

    @property
    def points(self) -> set[Point]:
        """The family's grid: the points planned and the points run."""
        return self.planned | {point(t) for t in self.trials}

    @property
    def not_started(self) -> int:
        return len(self.planned - {point(t) for t in self.trials})

    @property
    def complete(self) -> bool:
        """Every planned point has a finished trial."""
        return self.count("running") == 0 and self.not_started == 0

    @property
    def wall_time_s(self) -> float:
        """The finished trials' summed wall time (a shared or paused machine's is longer than cost_s)."""
        return sum(t.wall_time_s or 0.0 for t in self.trials if t.finished)

    @property
    def cost_s(self) -> float:
        """The search's cost: the finished trials' summed seconds of one core (seqbench.training.clocks.run_seconds)."""
        return sum(t.cost_s or 0.0 for t in self.trials if t.finished)

    @property
    def candidates(self) -> list[Trial]:
        return [t for t in self.trials if t.candidate]

    @property
    def gaps(self) -> list[int]:
        """The probe gaps (`data.T`) the search ran at; empty for a language model's search."""
        return sorted({p[3] for p in self.points if p[3] is not None})

    @property
    def learned_nothing(self) -> bool:
        """A probe's search whose completed trials all stayed at the baseline (`Trial.learned`)."""
        return bool(self.candidates) and not any(t.learned for t in self.candidates)

    @property
    def best(self) -> Trial | None:
        """The candidate with the lowest selection loss; None where it learned nothing. A search over several gaps picks one setting for
        all of them: the one with the lowest mean selection loss over the gaps, among the settings with
        a candidate at every gap (its trial is returned with that mean as its loss and no gap). Taking the
        lowest single trial instead would pick the shortest gap's best rate, the easiest task's."""
        if self.learned_nothing:
            return None
        if len(self.gaps) < 2:
            return min(self.candidates, key=lambda t: t.loss, default=None)
        by_setting: dict[tuple, dict[int, Trial]] = {}
        for t in self.candidates:
            by_setting.setdefault((t.budget, t.lr_scale, t.tokens_grid), {})[t.gap] = t
        means = [(statistics.fmean(t.loss for t in at.values()), at) for at in by_setting.values()
                 if set(at) == set(self.gaps)]
        if not means:
            return None
        mean, at = min(means, key=lambda m: m[0])
        return replace(at[self.gaps[-1]], loss=mean, gap=None, job="mean over gaps " + ", ".join(
            t.job for t in at.values()))

    @property
    def median_loss(self) -> float | None:
        losses = [t.loss for t in self.candidates]
        return statistics.median(losses) if losses else None

    @property
    def lr_axis(self) -> list[float]:
        return sorted({p[1] for p in self.points if p[1] is not None})

    @property
    def tokens_axis(self) -> list[int]:
        return sorted({p[2] for p in self.points if p[2] is not None})

    @property
    def selected_on(self) -> str | None:
        return self.trials[0].selected_on if self.trials else None

    def edges(self) -> list[str]:
        """Which edges of its grid the best trial lies on (empty: inside, or nothing completed yet)."""
        best = self.best
        if best is None:
            return []
        out = []
        for axis, value, low, high in ((self.lr_axis, best.lr_scale, "lowest lr", "highest lr"),
                                       (self.tokens_axis, best.tokens_grid, "fewest tokens", "most tokens")):
            if len(axis) > 1 and value == axis[0]:
                out.append(low)
            if len(axis) > 1 and value == axis[-1]:
                out.append(high)
        return out

    @property
    def untuned_loss(self) -> float | None:
        """The mean selection loss of the recipe's completed runs selected on the same data, if any."""
        losses = [t.loss for t in self.untuned if t.candidate and t.selected_on == self.selected_on]
        return statistics.fmean(losses) if losses else None

    @property
    def gain(self) -> float | None:
        """Tuned best minus untuned: below zero where the search found a better setting."""
        best, untuned = self.best, self.untuned_loss
        return None if best is None or untuned is None else best.loss - untuned

    @property
    def tuned_beats_untuned(self) -> bool | None:
        return None if self.gain is None else self.gain < 0


def searches(trials: list[Trial], plans: dict[tuple[str, str], set[Point]] | None = None,
             untuned: list[Trial] = ()) -> list[Search]:
    """One Search per (corpus, family, size, budget) with trials, in corpus then table order; a planned
    family that has not started any trial gets one too (no size or budget known yet), and so does a
    planned budget that none of a family's trials has reached (no size known yet)."""
    groups: dict[Key, Search] = {}
    for trial in trials:
        groups.setdefault(key_of(trial), Search(*key_of(trial))).trials.append(trial)
    for (corpus, family), points in (plans or {}).items():
        mine = [s for s in groups.values() if (s.corpus, s.family) == (corpus, family)]
        at = lambda p, s: p[0] is None or s.budget is None or float(p[0]) == float(s.budget)  # noqa: E731
        for s in mine:
            s.planned |= {p for p in points if at(p, s)}
        # a budget the sweep plans that none of the family's trials has reached is a search not started:
        # left out, a two-budget sweep whose first budget had finished was recorded "complete"
        for budget in {p[0] for p in points if mine and not any(at(p, s) for s in mine)}:
            groups[(corpus, family, None, budget)] = Search(corpus, family, None, budget,
                                                            planned={p for p in points if p[0] == budget})
        if not mine:
            groups[(corpus, family, None, None)] = Search(corpus, family, None, None, planned=set(points))
    for run in untuned:
        if run.untuned and key_of(run) in groups:
            groups[key_of(run)].untuned.append(run)
    corpora = list(dict.fromkeys(s.corpus for s in groups.values()))
    rank = {name: i for i, name in enumerate(order({s.family for s in groups.values()}))}
    # a size not known yet (a budget not started) after the known ones, so a family's budgets stay in order
    return sorted(groups.values(), key=lambda s: (corpora.index(s.corpus), rank[s.family], s.size is None,
                                                  str(s.size), s.budget or 0.0))


def edge_families(found: list[Search]) -> dict[str, list[str]]:
    """family -> the edges its best lies on, for the families whose best lies on one; a family whose
    search has not finished is said so (its best so far may move off the edge)."""
    return {f"{s.family}" + (f" ({s.size}, {s.budget:g} FLOPs)".replace("e+", "e") if s.budget else "")
            + ("" if s.complete else ", search not finished"): s.edges() for s in found if s.edges()}


def token_neighbours(found: list[Search]) -> dict[str, list[int]]:
    """family -> the grid's tokens-per-step values next to its best's (asked as the search asked them,
    so they round to the same streams or windows), from the search with the most trials: the transfer
    check's second axis (`seqbench.protocol.chain.Chain.transfer`)."""
    out = {}
    for search in sorted(found, key=lambda s: len(s.trials)):
        best, axis = search.best, search.tokens_axis
        if best is not None and best.tokens_grid in axis:
            i = axis.index(best.tokens_grid)
            out[search.family] = [axis[j] for j in (i - 1, i + 1) if 0 <= j < len(axis)]
    return out
