"""The transfer check's result: the setting each family trains with at each compute tier.

The search runs at one tier (1e12 FLOPs); the final cells run at every tier of the frontier. A setting
tuned on a small budget need not hold on a larger one: at 1e12 the search put most families' best at
the grid's fewest tokens per step (more optimizer steps win a short budget), and on PTB the small GRU's
setting from 1e12 gave validation perplexity 401 at 1e13 where its untuned recipe gave 177. The tokens a
step should hold grow with the budget (McCandlish et al. 2018), and so may the rate's optimum.

So the chain checks every tier it did not search (`seqbench.protocol.chain.Chain.transfer`): each family at
the searched size with its tuned setting, the rate x ½ and x 2 (and further that way while the best lies
on the lowest or highest rate tried, `rate_extensions`), and its tuned rate at the tokens-per-step grid's
neighbours of its best, one seed each. This module reads those runs, by one rule for every family:

- **a tier's setting is the best checked trial there** (the search's own rule, `Search.best`: the lowest
  selection loss among the completed trials, a diverged one never), the tuned setting itself being one
  of the trials, **where it beats the tuned setting by more than `MARGIN`**; a tier with no completed
  check, or where the best wins by less, keeps the tuned setting;
- `markdown` says for each (family, tier) whether the tuned setting held or moved, to what, and by how
  much selection loss.

A single seed decides between five points here, as it did between the search's 20–36: the final cells'
seeds then measure the chosen setting, so a choice made on noise costs a little loss, never a wrong
interval; the margin keeps a win inside the seed noise from buying the tier's size runs again.

`python -m seqbench.protocol.transfer` prints the checks as a table and writes their record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from seqbench.protocol.tuning import searched

Setting = dict  # {"lr_scale": float, "tokens_per_step": int | None}

# Selection loss (nats) a checked setting must save over the tuned one to replace it at a tier. One seed
# decides here, and a win inside the seed noise would spend the tier's size runs again on a difference no
# seed count could show: the untuned frontier's two-seed cells (experiments/figures/frontier-*/runs.csv)
# have a median seed sd of 0.013 nats (24 cells; 0.005 on PTB, 0.019 on Tiny Shakespeare), rounded down
# so that a move is taken rather than missed.
MARGIN = 0.01


# Rate steps (each x ½ or x 2) the check may take beyond the tuned rate's two neighbours at one tier, in
# the direction its best lies: see `rate_extensions`.
EXTENSIONS = 3


def same_setting(a: Setting, b: Setting) -> bool:
    """Whether two settings are the same point of the grid (rates compared in log space, tokens exactly)."""
    def rate(s: Setting) -> float:
        return float(s.get("lr_scale") or 1.0)

    return math.isclose(rate(a), rate(b), rel_tol=1e-6) and a.get("tokens_per_step") == b.get("tokens_per_step")


def setting_of(trial) -> Setting:
    """A trial's point as `tune.per_family` gives it: the tokens its steps held (asked again, they round to
    the same streams or windows), or None where the trial kept the recipe's batch."""
    return {"lr_scale": trial.lr_scale, "tokens_per_step": trial.tokens_per_step if trial.tokens_grid is not None else None}


@dataclass
class Check:
    """One family's check at one tier."""
    family: str
    tier: float
    tuned: Setting           # the search's best (at the searched tier)
    chosen: Setting          # the best checked trial here (the tuned setting where it held)
    tuned_loss: float | None  # the tuned setting's selection loss at this tier (None: not run, or diverged)
    chosen_loss: float
    trials: int               # trials with a record (finished or not)
    finished: int
    planned: int | None = None  # the check's trials at this tier, where the chain's sweeps say (`Chain.transfer`)

    @property
    def complete(self) -> bool:
        """Every planned trial has finished: a check still running moves nothing (its tuned trial, or the
        neighbour that would win, may not have run yet)."""
        return self.planned is None or self.finished >= self.planned

    @property
    def best_is_tuned(self) -> bool:
        return same_setting(self.tuned, self.chosen)

    @property
    def held(self) -> bool:
        """The tuned setting stays: it is the best checked trial, or the best beats it by `MARGIN` or less
        (a tuned setting that diverged or did not finish here never holds against a completed one)."""
        return self.best_is_tuned or (self.gain is not None and self.gain <= MARGIN)

    @property
    def gain(self) -> float | None:
        """Selection loss the move saves at this tier (nats); 0 where the tuned setting held."""
        return None if self.tuned_loss is None else self.tuned_loss - self.chosen_loss


def checks(transfer_runs, tuned: dict[str, Setting], planned: dict[tuple[str, float], int] | None = None
           ) -> dict[tuple[str, float], Check]:
    """(family, tier) -> its check, from the transfer sweeps' runs (`seqbench.training.record.Run`), for the
    families with a tuned setting; a (family, tier) with no completed trial has no check. `planned`:
    (family, tier) -> the trials the chain's sweeps hold there."""
    out = {}
    for search in searched(transfer_runs):
        if search.family not in tuned or search.budget is None or search.best is None:
            continue
        own = [t for t in search.candidates if same_setting(setting_of(t), tuned[search.family])]
        best = search.best
        out[(search.family, float(search.budget))] = Check(
            search.family, float(search.budget), tuned[search.family], setting_of(best),
            min((t.loss for t in own), default=None), best.loss, len(search.trials),
            sum(t.finished for t in search.trials), (planned or {}).get((search.family, float(search.budget))))
    return out


def rate_extensions(search, tuned: Setting) -> list[float]:
    """The rates the check runs at one tier beyond the tuned rate x ½, x 1 and x 2 (at the tuned tokens per
    step): those already run there and, where the best of the trials at the tuned tokens lies on the lowest
    or the highest rate run, one step further that way (x ½ or x 2), up to `EXTENSIONS` steps.

    The search's own edge rule, applied to the check: a best on the edge of what was tried says the
    optimum may lie beyond it. Every family the first check moved, on both corpora, moved to its lowest
    rate checked (PTB's LSTM and GRU, Tiny Shakespeare's RNN, GRU and minLSTM at 1e13), so the move alone
    would settle each on the edge of three points. Nothing is added until all three first rates have
    finished (the best is not known before), nor past a rate that diverged (it is never the best). The
    tokens axis has its own rule (`token_extensions`).
    `search`: the tier's `Search` of the transfer sweeps' runs for this family (None: none ran yet)."""
    if search is None:
        return []
    lr = float(tuned.get("lr_scale") or 1.0)

    def near(a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=1e-6)

    first = (lr / 2, lr, lr * 2)
    mine = [t for t in search.trials if t.lr_scale is not None
            and setting_of(t)["tokens_per_step"] == tuned.get("tokens_per_step")]
    added = sorted({float(t.lr_scale) for t in mine if not any(near(t.lr_scale, r) for r in first)})
    if any(not t.finished for t in mine) or not all(any(near(t.lr_scale, r) for t in mine) for r in first):
        return added
    best = min((t for t in mine if t.candidate), key=lambda t: t.loss, default=None)
    if best is None:
        return added
    rates = sorted({float(t.lr_scale) for t in mine})
    if near(best.lr_scale, rates[0]) and rates[0] / 2 >= lr / 2 ** (1 + EXTENSIONS) * (1 - 1e-9):
        return sorted([*added, rates[0] / 2])
    if near(best.lr_scale, rates[-1]) and rates[-1] * 2 <= lr * 2 ** (1 + EXTENSIONS) * (1 + 1e-9):
        return sorted([*added, rates[-1] * 2])
    return added


def token_extensions(search, tuned: Setting, neighbours: list[int] | None) -> list[int]:
    """The tokens per step the check runs at one tier beyond the tuned value and its grid neighbours (at the
    tuned rate): those already run there and, where the best of them is the most tokens run, twice that,
    up to `EXTENSIONS` doublings past the neighbours.

    The rate's edge rule on the second axis, upwards only. On the H200 on 2026-11-29 PTB's minGRU and
    minLSTM had their best at 1e13 on the most tokens checked (512 against the tuned 245: 0.11 nats
    better for minLSTM), and the tokens a step should hold grow with the budget (McCandlish et al.
    2018): the check runs at the tiers above the search first. Downwards a step cannot hold fewer tokens
    than one stream or window, which the grid's smallest value is already near, so no extension goes
    below the grid. Nothing is added until the tuned value and its neighbours have finished, nor past a
    value that diverged. `search`: the tier's `Search` of the transfer sweeps' runs for this family;
    `neighbours`: the grid values the check asked beside the tuned one (`tuning_search.token_neighbours`)."""
    if search is None or not neighbours or tuned.get("tokens_per_step") is None:
        return []
    lr = float(tuned.get("lr_scale") or 1.0)
    mine = [t for t in search.trials if t.tokens_grid is not None and t.lr_scale is not None
            and math.isclose(float(t.lr_scale), lr, rel_tol=1e-6)]
    tokens = int(tuned["tokens_per_step"])
    top = max(tokens, *map(int, neighbours))
    ladder = [top * 2 ** k for k in range(1, EXTENSIONS + 1)]  # the only values it ever adds: a fixed ladder

    def at(t, value: int) -> bool:  # asked that value, or held it
        return t.tokens_grid == value or setting_of(t)["tokens_per_step"] == value

    def ran(value: int) -> bool:
        return any(at(t, value) for t in mine)

    added = []
    for value in ladder:  # the rungs run so far, in order
        if not ran(value):
            break
        added.append(value)
    tried = [tokens, *map(int, neighbours), *added]
    if any(not t.finished for t in mine) or not all(ran(v) for v in tried):
        return added
    best = min((t for t in mine if t.candidate), key=lambda t: t.loss, default=None)
    most = max(tried)
    if best is not None and at(best, most) and len(added) < len(ladder):
        return [*added, ladder[len(added)]]
    return added


def per_tier(tuned: dict[str, Setting], found: dict[tuple[str, float], Check]) -> dict[tuple[str, float], Setting]:
    """(family, tier) -> the setting the check chose there, for the tiers where it moved away from the
    tuned setting by more than `MARGIN`, once every trial of the check has finished (every other
    (family, tier) trains with `tuned[family]`)."""
    return {key: dict(c.chosen) for key, c in found.items() if c.complete and not c.held}


def setting_at(tuned: dict[str, Setting], moved: dict[tuple[str, float], Setting], family: str, tier: float) -> Setting:
    return moved.get((family, float(tier)), tuned[family])
