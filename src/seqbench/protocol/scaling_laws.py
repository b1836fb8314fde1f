"""Compute laws from IsoFLOP profiles: Hoffmann et al. (2022), approach 2, with the marks a sceptic asks for.

At each compute budget C, a family trains at several sizes; the loss against log size is a valley, and its
bottom (a parabola through the lowest points) is the family's optimum at that budget: the size worth
training, and the loss it reaches. Over budgets, the optima follow power laws,

    L*(C) = E + A·C^(−α)          (the optimal loss; E the loss no compute removes)
    F*(C) ∝ C^a,  N*(C) ∝ C^b     (the optimal FLOPs per token and non-embedding parameters)

and two families' L*(C) cross where one overtakes the other. Every number here comes with an interval
from a bootstrap over seeds and sizes, and three marks keep a profile from saying more than it shows:

- **unbracketed**: the lowest measured loss is at an edge of the size grid, so the optimum may lie beyond
  it; the profile names no optimum, and a law never reads it;
- **data-limited**: the runs at a size repeat their training text more than `DATA_LIMIT` times
  (Muennighoff et al. 2023: up to about 4 epochs cost little, beyond that returns fall fast). Such points
  measure memorisation of one text, not what compute buys: they are left out of the profile, and a
  profile whose valley runs into them (its lowest clean point is its smallest clean size, with
  repeated-data sizes below) is data-limited as a whole;
- **too few sizes**: fewer than three clean sizes, so no valley can be seen.

The size axis is the training FLOPs per token F, counted as the budget counts them (head included):
then C = F·D exactly, with D the tokens trained, whatever the family.

Pure numpy: the readers of the runs (`seqbench` records) build `Point`s; the pages print what this
returns. `tests/test_scaling_laws.py` recovers synthetic laws and checks the bootstrap's coverage.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

DATA_LIMIT = 4.0  # passes over the training text beyond which a run measures repetition (Muennighoff et al. 2023)
NEIGHBOURS = 2    # the parabola reads the lowest point and up to this many clean sizes on each side of it
BRACKETED, UNBRACKETED, DATA_LIMITED, TOO_FEW = "bracketed", "unbracketed", "data-limited", "too few sizes"


@dataclass(frozen=True)
class Point:
    """One cell of a profile: a family at one size and one budget, with its seeds' losses."""

    family: str
    budget: float                  # C: training FLOPs
    size: str                      # the size's name (xs, s, m, ...)
    flops_per_token: float         # F, as the budget counts it
    params: float                  # non-embedding parameters N
    losses: tuple[float, ...]      # the selection loss of each seed
    passes: float                  # passes over the training text: tokens trained / training tokens

    @property
    def loss(self) -> float:
        return float(np.mean(self.losses))

    @property
    def data_limited(self) -> bool:
        return self.passes > DATA_LIMIT


@dataclass(frozen=True)
class Optimum:
    """A profile's bottom: where it is (log10 F*, log10 N*), the loss there, and whether it may be read."""

    family: str
    budget: float
    status: str                      # BRACKETED, UNBRACKETED, DATA_LIMITED or TOO_FEW
    log_f: float = math.nan          # log10 of the optimal FLOPs per token
    log_n: float = math.nan          # log10 of the optimal non-embedding parameters (interpolated in log F)
    loss: float = math.nan           # the parabola's minimum
    sizes: int = 0                   # sizes in the profile
    span: float = 1.0                # largest / smallest F of the profile
    best: str = ""                   # the measured size with the lowest loss (clean sizes only)
    edge: str = ""                   # "below" / "above": where an unbracketed profile's optimum may lie

    @property
    def usable(self) -> bool:
        return self.status == BRACKETED


def _vertex(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float] | None:
    """The minimum (x*, y*) of the weighted least-squares parabola through (x, y); None where it opens
    downward."""
    v = np.stack([x * x, x, np.ones_like(x)], axis=1) * w[:, None]   # the weighted Vandermonde rows
    c2, c1, c0 = np.linalg.lstsq(v, y * w, rcond=None)[0]
    if c2 <= 0:
        return None
    xv = -c1 / (2 * c2)
    return float(xv), float(c0 - c1 * c1 / (4 * c2))


def optimum(points: Sequence[Point], losses: Sequence[float] | None = None) -> Optimum:
    """The profile's optimum from its points (one family, one budget). `losses` replaces the points' mean
    losses (a bootstrap draw), in the points' order.

    The parabola runs through the lowest clean point and up to `NEIGHBOURS` clean sizes each side, in
    log10 F; where a least-squares parabola over five points opens downward or puts its bottom outside
    them (a valley flatter than the noise), the three points around the lowest decide, which always give
    a vertex between their outer two."""
    if not points:
        raise ValueError("a profile needs at least one point")
    family, budget = points[0].family, points[0].budget
    values = [p.loss for p in points] if losses is None else list(losses)
    # a size drawn twice (a bootstrap draw) is one point of the grid, its losses averaged and weighted by count
    by_size: dict[float, list[int]] = {}
    for i, p in enumerate(points):
        by_size.setdefault(float(p.flops_per_token), []).append(i)
    pts = [points[by_size[f][0]] for f in sorted(by_size)]
    y_all = np.array([np.mean([values[i] for i in by_size[f]]) for f in sorted(by_size)], dtype=float)
    w_all = np.sqrt([len(by_size[f]) for f in sorted(by_size)])
    x_all = np.log10([p.flops_per_token for p in pts])
    span = float(10 ** (x_all[-1] - x_all[0]))
    clean = [i for i, p in enumerate(pts) if not p.data_limited]
    base = dict(family=family, budget=budget, sizes=len(pts), span=span)
    if len(clean) < 3:
        return Optimum(**base, status=DATA_LIMITED if len(clean) < len(pts) else TOO_FEW)
    low = min(clean, key=lambda i: y_all[i])
    where = clean.index(low)
    best = pts[low].size
    if where == 0:
        # the valley runs off the clean grid's lower end: beyond it either repeated-data sizes or nothing
        status = DATA_LIMITED if clean[0] > 0 else UNBRACKETED
        return Optimum(**base, status=status, best=best, edge="below")
    if where == len(clean) - 1:
        return Optimum(**base, status=UNBRACKETED, best=best, edge="above")
    window = clean[max(0, where - NEIGHBOURS): where + NEIGHBOURS + 1]
    x, y = x_all[window], y_all[window]
    vertex = _vertex(x, y, w_all[window])
    if vertex is None or not x[0] <= vertex[0] <= x[-1]:
        three = clean[where - 1: where + 2]
        vertex = _vertex(x_all[three], y_all[three], w_all[three])
    xv, yv = vertex
    log_n = float(np.interp(xv, x_all, np.log10([max(p.params, 1.0) for p in pts])))
    return Optimum(**base, status=BRACKETED, log_f=xv, log_n=log_n, loss=yv, best=best)


def profiles(points: Iterable[Point]) -> dict[tuple[str, float], list[Point]]:
    """Points grouped by (family, budget)."""
    out: dict[tuple[str, float], list[Point]] = {}
    for p in points:
        out.setdefault((p.family, float(p.budget)), []).append(p)
    return out


# -- the laws ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Law:
    """L*(C) = E + A·C^(−α) for one family; `E` may be shared with the corpus's other families."""

    E: float
    A: float
    alpha: float

    def __call__(self, compute) -> np.ndarray:
        return self.E + self.A * np.power(np.asarray(compute, dtype=float), -self.alpha)


def _fits_for_e(log_c: np.ndarray, loss: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each E in `e` (shape (k,)): (A, α, squared error) of L = E + A·C^(−α), the straight line of
    log(L − E) against log C fitted in closed form; vectorised over E, every array of shape (k,)."""
    y = np.log(loss[None, :] - e[:, None])                          # (k, n)
    xc = log_c - log_c.mean()
    slope = (y - y.mean(axis=1, keepdims=True)) @ xc / (xc @ xc)    # (k,)
    intercept = y.mean(axis=1) - slope * log_c.mean()
    a, alpha = np.exp(intercept), -slope
    resid = loss[None, :] - e[:, None] - a[:, None] * np.exp(-alpha[:, None] * log_c[None, :])
    return a, alpha, np.einsum("kn,kn->k", resid, resid)


def _best_e(error, lo: float, hi: float, points: int = 128, rounds: int = 3) -> float:
    """The E in [lo, hi] that minimises `error` (vectorised over an array of E): a grid, then finer grids
    around its best point (the error is smooth in E, with one valley over the range a fit can take)."""
    for _ in range(rounds):
        grid = np.linspace(lo, hi, points)
        i = int(np.argmin(error(grid)))
        step = grid[1] - grid[0]
        lo, hi = max(grid[0], grid[i] - step), min(grid[-1], grid[i] + step)
    return float((lo + hi) / 2)


def _e_range(series: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """The E a fit may take: from 0 up to just under the lowest loss any of the series reaches (L − E > 0)."""
    lowest = min(float(loss.min()) for _, loss in series)
    spread = max(float(loss.max() - loss.min()) for _, loss in series) or 1.0
    return 0.0, lowest - 1e-3 * spread


def fit_laws(series: dict[str, tuple[Sequence[float], Sequence[float]]], shared_e: bool = True) -> dict[str, Law]:
    """Each family's law from its optima, {family: (budgets, optimal losses)}. `shared_e`: one E for every
    family (the corpus's irreducible loss: the text's entropy is not the model's), chosen with the families'
    A and α to minimise the summed squared error; otherwise each family its own E. A family needs at
    least two budgets with a shared E and three with its own; with fewer it is left out."""
    data = {f: (np.log(np.asarray(c, dtype=float)), np.asarray(l, dtype=float)) for f, (c, l) in series.items()}
    need = 2 if shared_e else 3
    data = {f: d for f, d in data.items() if len(set(d[0].tolist())) >= need}
    if not data:
        return {}

    def law(e: float, lc: np.ndarray, l: np.ndarray) -> Law:
        a, alpha, _ = _fits_for_e(lc, l, np.array([e]))
        return Law(e, float(a[0]), float(alpha[0]))

    if shared_e:
        e = _best_e(lambda es: sum(_fits_for_e(lc, l, es)[2] for lc, l in data.values()), *_e_range(list(data.values())))
        return {f: law(e, lc, l) for f, (lc, l) in data.items()}
    return {f: law(_best_e(lambda es: _fits_for_e(lc, l, es)[2], *_e_range([(lc, l)])), lc, l)
            for f, (lc, l) in data.items()}


def fit_size_exponent(budgets: Sequence[float], log_sizes: Sequence[float]) -> tuple[float, float]:
    """(exponent, log10 of the constant) of size*(C) = k·C^a, a straight line in log-log."""
    a, k = np.polyfit(np.log10(np.asarray(budgets, dtype=float)), np.asarray(log_sizes, dtype=float), 1)
    return float(a), float(k)


# -- where two laws cross ----------------------------------------------------------------------------
HORIZON = 1e20  # "no crossing before" this many FLOPs: beyond any budget the laws were fitted near
AHEAD, CROSSES, NEVER = "ahead from the first tier", "crosses", "no crossing before 1e20 FLOPs"


def crossing(challenger: Law, incumbents: Sequence[Law], start: float, horizon: float = HORIZON) -> tuple[str, float]:
    """Where `challenger`'s loss first falls below the lowest of `incumbents`' (their lower envelope: the best
    of the other side at each budget), searching from `start` (the first fitted tier) up to `horizon`:
    (AHEAD, start) when it is lower there already, (CROSSES, C) at the crossing, (NEVER, inf) otherwise."""
    grid = np.logspace(math.log10(start), math.log10(horizon), 2000)
    gap = challenger(grid) - np.min([law(grid) for law in incumbents], axis=0)  # > 0: the challenger is behind
    if gap[0] <= 0:
        return AHEAD, start
    below = np.flatnonzero(gap <= 0)
    if below.size == 0:
        return NEVER, math.inf
    i = int(below[0])
    # linear in log C between the two grid points that straddle the sign change
    x0, x1, g0, g1 = math.log10(grid[i - 1]), math.log10(grid[i]), gap[i - 1], gap[i]
    return CROSSES, 10 ** (x0 + (x1 - x0) * g0 / (g0 - g1))


def pooled_seed_sd(points: Iterable[Point]) -> float:
    """The seeds' standard deviation pooled over every cell with two or more seeds (0 where none has)."""
    ss, dof = 0.0, 0
    for p in points:
        if len(p.losses) > 1:
            v = np.asarray(p.losses, dtype=float)
            ss += float(((v - v.mean()) ** 2).sum())
            dof += len(v) - 1
    return math.sqrt(ss / dof) if dof else 0.0


def interval(values, level: float = 0.95) -> tuple[float, float]:
    """The central percentile interval of bootstrap draws (nan, nan where there are none)."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return math.nan, math.nan
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(values, [tail, 100 - tail])
    return float(lo), float(hi)


def series_of(optima: Iterable[Optimum]) -> dict[str, tuple[list[float], list[float], list[float], list[float]]]:
    """{family: (budgets, losses, log10 F*, log10 N*)} of the usable optima, by budget."""
    out: dict[str, tuple[list, list, list, list]] = {}
    for o in sorted((o for o in optima if o.usable), key=lambda o: (o.family, o.budget)):
        c, l, f, n = out.setdefault(o.family, ([], [], [], []))
        c.append(o.budget), l.append(o.loss), f.append(o.log_f), n.append(o.log_n)
    return out


def optima_of(points: Iterable[Point], max_budget: float | None = None) -> list[Optimum]:
    """Every profile's optimum (up to `max_budget`), from the points' mean losses."""
    return [optimum(group) for (_, budget), group in profiles(points).items()
            if max_budget is None or budget <= max_budget]


def laws_of(points: Sequence[Point], shared_e: bool = True, max_budget: float | None = None) -> dict[str, Law]:
    """The laws fitted to the usable optima of the profiles up to `max_budget`."""
    series = series_of(optima_of(points, max_budget))
    return fit_laws({f: (c, l) for f, (c, l, _, _) in series.items()}, shared_e)


def held_out_error(points: Sequence[Point], shared_e: bool, max_budget: float | None = None) -> float:
    """Root mean squared error of predicting each family's optimum at a budget from the laws fitted to the
    others (leave one budget out, every budget but the lowest: a law needs the ones below to extrapolate):
    the held-out comparison that decides between one E per corpus and one per family."""
    usable = [o for o in optima_of(points, max_budget) if o.usable]
    budgets = sorted({o.budget for o in usable})
    errors = []
    for held in budgets[1:]:
        series = series_of(o for o in usable if o.budget != held)
        laws = fit_laws({f: (c, l) for f, (c, l, _, _) in series.items()}, shared_e)
        errors += [float(laws[o.family](held)) - o.loss for o in usable if o.budget == held and o.family in laws]
    return math.sqrt(float(np.mean(np.square(errors)))) if errors else math.nan


# -- which sizes a profile still needs --------------------------------------------------------------
MIN_SIZES, MIN_SPAN = 5, 8.0  # a profile: at least five sizes spanning at least 8x in FLOPs per token


def sizes_to_add(points: Sequence[Point], ladder: Sequence[str]) -> list[str]:
    """The sizes of `ladder` (every size name the family has, smallest first) one profile should run next:
    one step beyond an edge its valley runs off (below or above), and while it has fewer than `MIN_SIZES`
    sizes or spans less than `MIN_SPAN` in FLOPs per token, the ladder's next size on the side of its
    lowest point that has fewer sizes run (below first on a tie). A valley that runs into repeated-text
    sizes is not extended downward (smaller models would repeat the text more), nor is any profile whose
    lowest clean point is interior and whose grid is complete. An empty list: the profile is done, or the
    ladder has no size further that way (the caller reports it as unbracketed at the ladder's end)."""
    ran = {p.size for p in points}
    unknown = ran - set(ladder)
    if unknown:
        raise ValueError(f"sizes {sorted(unknown)} are not on the ladder {list(ladder)}")
    have = [i for i, name in enumerate(ladder) if name in ran]
    lo, hi = have[0], have[-1]
    found = optimum(points)
    below = ladder[lo - 1] if lo > 0 else None
    above = ladder[hi + 1] if hi + 1 < len(ladder) else None
    if found.status == UNBRACKETED:
        step = below if found.edge == "below" else above
        return [step] if step else []
    if found.status == DATA_LIMITED:
        return [above] if above and found.edge != "below" else []
    if len(have) >= MIN_SIZES and found.span >= MIN_SPAN:
        return []
    best = ladder.index(found.best) if found.best else (lo + hi) // 2
    if above is None or (below is not None and best - lo <= hi - best):
        return [below] if below else []
    return [above]
