"""The compute laws' intervals: a bootstrap over seeds and sizes, vectorised over its draws.

Each draw resamples every IsoFLOP profile twice over: its **sizes** with replacement (a multinomial count
per size: a size drawn twice weighs twice in the parabola, one not drawn is absent, so the valley's edges
move as they would with another grid), and each drawn point's **seeds** with replacement; a point with one
seed has no spread of its own, so it gets the corpus's pooled seed sd as Gaussian noise (over the count of
times it was drawn). The draw then does what `seqbench.protocol.scaling_laws` does once: the optimum of each profile
(the same rules: unbracketed and data-limited draws give none), the laws fitted to the optima, the
size exponents, and from them the predictions and the crossings. Percentiles of the draws are the intervals.

Written as array operations over the draws (a weighted parabola is three normal equations; a law with E
fixed is a straight line in log-log), so 1,000 draws of a corpus take well under a second: the coverage test
(200 synthetic data sets, each bootstrapped) stays inside the suite's time. `seqbench.protocol.scaling_laws.optimum`
and `fit_laws` are the readable versions, and `tests/test_scaling_laws.py` checks that a draw with every
size once and no noise gives their numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from seqbench.protocol.scaling_laws import HORIZON, NEIGHBOURS, Point, pooled_seed_sd, profiles

_TINY = 1e-12


@dataclass
class ProfileDraws:
    """One profile's optimum in each draw; `ok` False where the draw's profile was unbracketed,
    data-limited or short of sizes."""

    ok: np.ndarray        # (B,) bool
    loss: np.ndarray      # (B,)
    log_f: np.ndarray     # (B,) log10 F*
    log_n: np.ndarray     # (B,) log10 N*


@dataclass
class LawDraws:
    """Every family's law in each draw (nan where a draw fitted none for it)."""

    E: dict[str, np.ndarray] = field(default_factory=dict)
    A: dict[str, np.ndarray] = field(default_factory=dict)
    alpha: dict[str, np.ndarray] = field(default_factory=dict)
    size_exponent: dict[str, np.ndarray] = field(default_factory=dict)   # a of F*(C) ∝ C^a
    param_exponent: dict[str, np.ndarray] = field(default_factory=dict)  # b of N*(C) ∝ C^b

    def loss_at(self, family: str, compute: float | np.ndarray) -> np.ndarray:
        """(B,) or (B, G): each draw's predicted optimal loss at `compute`."""
        c = np.asarray(compute, dtype=float)
        e, a, alpha = self.E[family], self.A[family], self.alpha[family]
        if c.ndim == 0:
            return e + a * c ** -alpha
        return e[:, None] + a[:, None] * c[None, :] ** -alpha[:, None]


def _solve(m: np.ndarray, r: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Batched 3x3 solves; draws that are not `valid` get the identity (their result is not read)."""
    m = np.where(valid[:, None, None], m, np.eye(3)[None])
    return np.linalg.solve(m, r[..., None])[..., 0]


def _vertices(x: np.ndarray, y: np.ndarray, w: np.ndarray, valid: np.ndarray):
    """The weighted least-squares parabola of each draw (weights `w`, (B, n)), its vertex (x*, y*) and
    whether it opens upward with x* inside the weighted points' range."""
    X = np.stack([x * x, x, np.ones_like(x)], axis=1)                      # (n, 3)
    m = np.einsum("bn,ni,nj->bij", w, X, X)
    r = np.einsum("bn,ni,bn->bi", w, X, y)
    c2, c1, c0 = _solve(m, r, valid).T
    with np.errstate(divide="ignore", invalid="ignore"):
        xv = -c1 / (2 * c2)
        yv = c0 - c1 * c1 / (4 * c2)
    inside = np.where(w > 0, x[None, :], np.inf).min(1) <= xv
    inside &= xv <= np.where(w > 0, x[None, :], -np.inf).max(1)
    return xv, yv, (c2 > 0) & inside


def profile_draws(points: Sequence[Point], draws: int, rng: np.random.Generator, seed_sd: float,
                  resample_sizes: bool = True) -> ProfileDraws:
    """Each draw's optimum of one profile (one family, one budget), by the rules of
    `seqbench.protocol.scaling_laws.optimum` applied to the resampled sizes and seeds (`resample_sizes` False: every
    size once, the seeds alone resampled)."""
    pts = sorted(points, key=lambda p: p.flops_per_token)
    n = len(pts)
    x = np.log10([p.flops_per_token for p in pts])
    log_n = np.log10([max(p.params, 1.0) for p in pts])
    clean = np.array([not p.data_limited for p in pts])
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=draws)          # (B, n): sizes with replacement
    if not resample_sizes:
        counts[:] = 1
    counts[(counts > 0).sum(1) < 3] = 1                                    # fewer than three sizes: keep the grid
    y = np.array([p.loss for p in pts], dtype=float)[None, :].repeat(draws, 0)
    for i, p in enumerate(pts):
        if len(p.losses) > 1:   # seeds with replacement (a size drawn twice: the same draw of its seeds)
            seeds = np.asarray(p.losses, dtype=float)
            y[:, i] = seeds[rng.integers(0, len(seeds), size=(draws, len(seeds)))].mean(1)
        else:                   # one seed: the pooled seed sd, averaged over the times the size was drawn
            y[:, i] += rng.normal(0.0, 1.0, draws) * seed_sd / np.sqrt(np.maximum(counts[:, i], 1))
    usable = (counts > 0) & clean[None, :]
    rank = np.cumsum(usable, axis=1) - 1                                   # position among the draw's clean sizes
    low = np.argmin(np.where(usable, y, np.inf), axis=1)
    low_rank = rank[np.arange(draws), low]
    ok = (usable.sum(1) >= 3) & (low_rank > 0) & (low_rank < usable.sum(1) - 1)
    distance = np.abs(rank - low_rank[:, None])
    wide = np.where(usable & (distance <= NEIGHBOURS), counts, 0).astype(float)
    three = np.where(usable & (distance <= 1), counts, 0).astype(float)
    xv, yv, good = _vertices(x, y, wide, ok)
    xv3, yv3, _ = _vertices(x, y, three, ok)
    xv, yv = np.where(good, xv, xv3), np.where(good, yv, yv3)
    xv = np.where(ok, xv, np.nan)
    return ProfileDraws(ok, np.where(ok, yv, np.nan), xv, np.where(ok, np.interp(xv, x, log_n), np.nan))


def _line_fits(x: np.ndarray, y: np.ndarray, m: np.ndarray):
    """Masked least-squares lines y = k + s·x over the last axis (x (T,), y and mask m broadcastable):
    (slope, intercept, points)."""
    sm = m.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mx = (m * x).sum(-1) / sm
        my = (m * y).sum(-1) / sm
        dx = x - mx[..., None]
        slope = (m * dx * (y - my[..., None])).sum(-1) / (m * dx * dx).sum(-1)
    return slope, my - slope * mx, sm


def _law_errors(log_c: np.ndarray, loss: np.ndarray, ok: np.ndarray, e: np.ndarray):
    """For E of shape (B, k): the law's A, α and squared error of one family, each (B, k); a draw where the
    family has fewer than two optima contributes no error (and no law)."""
    m = ok[:, None, :].astype(float)
    y = np.log(np.maximum(loss[:, None, :] - e[:, :, None], _TINY))
    slope, intercept, sm = _line_fits(log_c, np.where(m > 0, y, 0.0), m)
    a, alpha = np.exp(intercept), -slope
    pred = e[:, :, None] + a[..., None] * np.exp(-alpha[..., None] * log_c)
    err = (m * (np.nan_to_num(loss[:, None, :]) - pred) ** 2).sum(-1)
    return a, alpha, np.where(sm >= 2, np.nan_to_num(err, nan=np.inf), 0.0)


def _best_e(total, lo: np.ndarray, hi: np.ndarray, points: int = 96, rounds: int = 3) -> np.ndarray:
    """Per draw, the E in [lo, hi] minimising `total(E)` ((B, k) -> (B, k)): a grid, then finer ones around
    the best point, as `seqbench.protocol.scaling_laws._best_e` does for one fit."""
    u = np.linspace(0.0, 1.0, points)
    for _ in range(rounds):
        grid = lo[:, None] + u[None, :] * (hi - lo)[:, None]
        i = np.argmin(total(grid), axis=1)
        step = (hi - lo) / (points - 1)
        best = grid[np.arange(len(i)), i]
        lo, hi = np.maximum(lo, best - step), np.minimum(hi, best + step)
    return (lo + hi) / 2


def law_draws(optima: dict[str, dict[float, ProfileDraws]], shared_e: bool = True) -> LawDraws:
    """Each draw's laws from its optima, {family: {budget: ProfileDraws}}, fitted as `fit_laws` fits them
    (a shared E: one per draw for every family; else each family its own)."""
    fams = {f: (np.log(np.array(sorted(by))), np.stack([by[c].loss for c in sorted(by)], 1),
                np.stack([by[c].ok for c in sorted(by)], 1), np.stack([by[c].log_f for c in sorted(by)], 1),
                np.stack([by[c].log_n for c in sorted(by)], 1)) for f, by in optima.items() if by}
    out = LawDraws()
    if not fams:
        return out
    need = 2 if shared_e else 3

    def e_range(members) -> tuple[np.ndarray, np.ndarray]:
        lows = np.stack([np.where(fams[f][2], fams[f][1], np.inf).min(1) for f in members], 1).min(1)
        highs = np.stack([np.where(fams[f][2], fams[f][1], -np.inf).max(1) for f in members], 1).max(1)
        spread = np.where(np.isfinite(highs - lows) & (highs > lows), highs - lows, 1.0)
        hi = np.where(np.isfinite(lows), lows - 1e-3 * spread, 1.0)
        return np.zeros_like(hi), np.maximum(hi, 0.0)

    def fit(members) -> np.ndarray:
        lo, hi = e_range(members)
        return _best_e(lambda es: sum(_law_errors(fams[f][0], fams[f][1], fams[f][2], es)[2] for f in members), lo, hi)

    shared = fit(list(fams)) if shared_e else None
    for f, (log_c, loss, ok, log_f, log_n) in fams.items():
        e = shared if shared_e else fit([f])
        a, alpha, _ = _law_errors(log_c, loss, ok, e[:, None])
        enough = ok.sum(1) >= need
        out.E[f] = np.where(enough, e, np.nan)
        out.A[f] = np.where(enough, a[:, 0], np.nan)
        out.alpha[f] = np.where(enough, alpha[:, 0], np.nan)
        log10_c = log_c / math.log(10)
        out.size_exponent[f] = _exponent(log10_c, log_f, ok)
        out.param_exponent[f] = _exponent(log10_c, log_n, ok)
    return out


def _exponent(log10_c: np.ndarray, log_size: np.ndarray, ok: np.ndarray) -> np.ndarray:
    slope, _, sm = _line_fits(log10_c, np.where(ok, log_size, 0.0), ok.astype(float))
    return np.where(sm >= 2, slope, np.nan)


def bootstrap(points: Sequence[Point], draws: int = 1000, shared_e: bool = True, max_budget: float | None = None,
              seed: int = 0, seed_sd: float | None = None) -> LawDraws:
    """The laws' draws over resampled seeds and sizes of every profile up to `max_budget` (the held-out
    tier stays out). `seed_sd`: the noise of a one-seed point (default: pooled over the cells with
    several seeds)."""
    rng = np.random.default_rng(seed)
    pts = [p for p in points if max_budget is None or p.budget <= max_budget]
    sd = pooled_seed_sd(pts) if seed_sd is None else seed_sd
    optima: dict[str, dict[float, ProfileDraws]] = {}
    for (family, budget), group in sorted(profiles(pts).items()):
        optima.setdefault(family, {})[budget] = profile_draws(group, draws, rng, sd)
    return law_draws(optima, shared_e)


def crossing_draws(draws: LawDraws, challenger: str, incumbents: Sequence[str], start: float,
                   horizon: float = HORIZON, grid: int = 600) -> np.ndarray:
    """Per draw, the compute where `challenger`'s law first falls below the lowest of `incumbents'` from
    `start` on: `start` itself where it is lower there already, inf where it stays behind up to `horizon`,
    nan where the draw fitted no law for it or for all the incumbents."""
    c = np.logspace(math.log10(start), math.log10(horizon), grid)
    mine = draws.loss_at(challenger, c)
    theirs = np.stack([draws.loss_at(f, c) for f in incumbents], 0)
    best = np.nanmin(np.where(np.isnan(theirs), np.inf, theirs), axis=0)
    gap = mine - best                                                      # (B, G): > 0 behind
    fitted = np.isfinite(mine[:, 0]) & np.isfinite(best[:, 0])
    ahead = gap <= 0
    first = np.argmax(ahead, axis=1)
    out = np.where(ahead.any(1), c[first], np.inf)
    i = np.clip(first, 1, grid - 1)
    g0, g1 = gap[np.arange(len(i)), i - 1], gap[np.arange(len(i)), i]
    x0, x1 = np.log10(c[i - 1]), np.log10(c[i])
    with np.errstate(divide="ignore", invalid="ignore"):
        interpolated = 10 ** (x0 + (x1 - x0) * g0 / (g0 - g1))
    out = np.where(ahead.any(1) & (first > 0), interpolated, out)
    return np.where(fitted, out, np.nan)
