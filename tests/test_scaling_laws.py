"""The compute laws (seqbench.protocol.scaling_laws, seqbench.protocol.scaling_bootstrap) on synthetic profiles whose truth is
known: the Chinchilla form L(N, D) = E + A/N^α + B/D^β (Hoffmann et al. 2022, their fitted constants), whose
IsoFLOP optima follow L*(C) = E + G·C^(−αβ/(α+β)) and N*(C) ∝ C^(β/(α+β)) exactly. The profiles are laid
out as the frontier lays them out (sizes two-fold apart in FLOPs per token around the optimum, one seed a
point, five budgets from 1e11 to 1e13), with a seed noise like the frontier's (0.005 nats)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from seqbench.protocol import scaling_bootstrap as sb
from seqbench.protocol import scaling_laws as sl

E, A, B, ALPHA, BETA = 1.0, 406.4, 410.7, 0.34, 0.28
LOSS_EXPONENT = ALPHA * BETA / (ALPHA + BETA)   # 0.1535: L*(C) - E ∝ C^-0.1535
SIZE_EXPONENT = BETA / (ALPHA + BETA)           # 0.4516: N*(C) ∝ C^0.4516
G = (ALPHA * A / (BETA * B)) ** (1 / (ALPHA + BETA))
TIERS = (1e11, 3e11, 1e12, 3e12, 1e13)


def chinchilla(n, d):
    return E + A / n**ALPHA + B / d**BETA


def profile_points(rng, budgets=TIERS, noise=0.005, sizes=7, step=2.0, family="f", seeds=1, passes=0.0):
    """Each budget's profile: `sizes` sizes `step`-fold apart in F = 6N around the true optimum, the grid
    shifted at random by up to half a step, `seeds` noisy losses per size."""
    points = []
    for c in budgets:
        best = G * (c / 6) ** SIZE_EXPONENT
        shift = rng.uniform(-0.5, 0.5)
        for k in range(sizes):
            n = best * step ** (k - (sizes - 1) / 2 + shift)
            losses = tuple(chinchilla(n, c / (6 * n)) + rng.normal(0, noise, seeds))
            points.append(sl.Point(family, c, f"k{k}", 6 * n, n, losses, passes))
    return points


def test_a_synthetic_power_law_with_noise_is_recovered_within_two_percent():
    # bug caught: E pinned at 0 (the irreducible loss not fitted: the exponent then absorbs it, 0.15 -> ~0.03)
    rng = np.random.default_rng(7)
    for _ in range(10):
        points = profile_points(rng)
        law = sl.laws_of(points)["f"]
        assert law.alpha == pytest.approx(LOSS_EXPONENT, rel=0.02)
        optima = sl.series_of(sl.optima_of(points))["f"]
        assert sl.fit_size_exponent(optima[0], optima[3])[0] == pytest.approx(SIZE_EXPONENT, rel=0.02)


def test_the_bootstrap_interval_covers_the_true_exponent_in_at_least_90_percent_of_200_draws():
    # bug caught: the sizes not resampled (seeds alone): the parabola's bias then goes unseen and the interval
    # covers the true exponent in about 70 % of data sets
    rng = np.random.default_rng(11)
    covered = 0
    for trial in range(200):
        draws = sb.bootstrap(profile_points(rng), draws=150, seed=trial, seed_sd=0.005)
        low, high = sl.interval(draws.alpha["f"])
        covered += low <= LOSS_EXPONENT <= high
    assert covered >= 180, covered


def _edge_profile(where: str) -> list[sl.Point]:
    """A profile whose lowest loss is at its smallest (`below`) or largest (`above`) size."""
    losses = [2.0, 2.1, 2.2, 2.3, 2.4] if where == "below" else [2.4, 2.3, 2.2, 2.1, 2.0]
    return [sl.Point("f", 1e12, f"k{k}", 1e6 * 2**k, 1e4 * 4**k, (loss,), 1.0) for k, loss in enumerate(losses)]


@pytest.mark.parametrize("where", ["below", "above"])
def test_a_profile_whose_minimum_is_at_an_edge_is_unbracketed_and_never_read(where):
    # bug caught: the edge rule dropped, so a parabola's extrapolated vertex is reported as the optimum
    found = sl.optimum(_edge_profile(where))
    assert (found.status, found.edge, found.usable) == (sl.UNBRACKETED, where, False)
    assert math.isnan(found.loss)
    draws = sb.profile_draws(_edge_profile(where), 200, np.random.default_rng(0), seed_sd=0.0)
    assert not draws.ok.any()


def test_a_data_limited_cell_is_marked_and_a_valley_that_runs_into_repeated_text_names_no_optimum():
    # bug caught: the threshold read as 40 passes (or not at all), so a run that saw its text 6 times counts
    # as a compute-limited point and its over-fitted loss shapes the valley
    def point(k, loss, passes):
        return sl.Point("f", 1e13, f"k{k}", 1e6 * 2**k, 1e4 * 4**k, (loss,), passes)

    assert point(0, 2.0, 6.0).data_limited and not point(0, 2.0, 3.9).data_limited
    # the smallest sizes repeat the text; the lowest clean loss is at the smallest clean size
    runs_into = [point(0, 1.90, 24.0), point(1, 1.95, 12.0), point(2, 2.00, 3.0), point(3, 2.1, 1.5),
                 point(4, 2.2, 0.7)]
    assert sl.optimum(runs_into).status == sl.DATA_LIMITED
    # repeated-text sizes far from the valley are left out, and the valley is read from the clean sizes
    apart = [point(0, 3.00, 24.0), point(1, 2.05, 3.5), point(2, 2.00, 1.8), point(3, 2.05, 0.9), point(4, 2.2, 0.4)]
    found = sl.optimum(apart)
    assert found.status == sl.BRACKETED and found.best == "k2"
    assert sb.profile_draws(runs_into, 100, np.random.default_rng(0), seed_sd=0.0).ok.sum() == 0


def test_a_draw_of_every_size_once_without_noise_is_the_readable_optimum_and_law():
    # bug caught: the vectorised parabola's weights or window differ from seqbench.protocol.scaling_laws.optimum's
    rng = np.random.default_rng(3)
    points = profile_points(rng, noise=0.0)
    groups = sl.profiles(points)
    optima = {}
    for (family, budget), group in groups.items():
        draws = sb.profile_draws(group, 4, rng, seed_sd=0.0, resample_sizes=False)
        scalar = sl.optimum(group)
        assert draws.ok.all()
        assert draws.log_f == pytest.approx(np.full(4, scalar.log_f), abs=1e-9)
        assert draws.loss == pytest.approx(np.full(4, scalar.loss), abs=1e-9)
        assert draws.log_n == pytest.approx(np.full(4, scalar.log_n), abs=1e-9)
        optima.setdefault(family, {})[budget] = draws
    law = sl.laws_of(points)["f"]
    vectorised = sb.law_draws(optima)
    assert vectorised.alpha["f"] == pytest.approx(np.full(4, law.alpha), rel=1e-3)
    assert vectorised.E["f"] == pytest.approx(np.full(4, law.E), rel=1e-3)


def test_two_laws_cross_where_the_algebra_says_and_the_three_outcomes_are_told_apart():
    # bug caught: the crossing read against the highest incumbent instead of their lower envelope, or the
    # first grid point's sign ignored (a challenger ahead from the start reported as crossing later)
    slow = sl.Law(1.0, 10.0, 0.10)
    fast = sl.Law(1.0, 40.0, 0.15)     # steeper: behind at small C, ahead beyond (40/10)^(1/0.05) = 4^20
    worse = sl.Law(1.0, 100.0, 0.10)
    status, where = sl.crossing(fast, [slow, worse], start=1e10)
    assert status == sl.CROSSES and where == pytest.approx(4.0**20, rel=0.01)
    assert sl.crossing(fast, [slow], start=1e13)[0] == sl.AHEAD     # past 4^20 = 1.1e12 already
    assert sl.crossing(slow, [fast], start=1e13) == (sl.NEVER, math.inf)
    assert sl.crossing(worse, [slow], start=1e10) == (sl.NEVER, math.inf)


def test_the_bootstrap_crossing_agrees_with_the_laws_and_says_never_and_ahead():
    # bug caught: the interpolation between grid points inverted (the crossing placed at the wrong end)
    draws = sb.LawDraws(E={"a": np.ones(3), "r": np.ones(3)}, A={"a": np.full(3, 40.0), "r": np.full(3, 10.0)},
                        alpha={"a": np.array([0.15, 0.15, 0.08]), "r": np.full(3, 0.10)})
    found = sb.crossing_draws(draws, "a", ["r"], start=1e10)
    assert found[0] == pytest.approx(4.0**20, rel=0.01) and found[1] == found[0]
    assert found[2] == math.inf
    ahead = sb.crossing_draws(draws, "r", ["a"], start=1e10)
    assert ahead[0] == pytest.approx(1e10)


def test_one_e_for_the_corpus_predicts_a_held_out_budget_better_when_the_families_share_it():
    # bug caught: the held-out budget left in the fit (the error then measures interpolation, ~0 for both)
    rng = np.random.default_rng(5)
    wins = 0
    for _ in range(10):
        points = profile_points(rng, family="f") + [  # g: the same E, 1.3 times the reducible loss
            sl.Point("g", p.budget, p.size, p.flops_per_token, p.params, tuple(E + 1.3 * (v - E) for v in p.losses),
                     p.passes) for p in profile_points(rng, family="g")]
        shared, own = sl.held_out_error(points, shared_e=True), sl.held_out_error(points, shared_e=False)
        assert shared > 1e-4
        wins += shared < own
    assert wins >= 8


LADDER = ("xxs", "xs", "s", "m", "l", "xl")


def _ladder_point(name: str, loss: float, passes: float = 1.0) -> sl.Point:
    k = LADDER.index(name)
    return sl.Point("f", 1e12, name, 1e6 * 2**k, 1e4 * 4**k, (loss,), passes)


def test_a_profile_grows_past_the_edge_its_valley_runs_off_and_to_five_sizes_spanning_8x():
    # bug caught: the next size taken on the wrong side of an edge, or a bracketed three-size profile left
    # at three sizes (a valley the parabola reads from three points, a grid spanning 4x)
    def add(losses: dict[str, float], **passes) -> list[str]:
        return sl.sizes_to_add([_ladder_point(n, v, passes.get(n, 1.0)) for n, v in losses.items()], LADDER)

    assert add({"s": 2.0, "m": 2.1, "l": 2.2}) == ["xs"]                   # lowest at the smallest: go down
    assert add({"s": 2.2, "m": 2.1, "l": 2.0}) == ["xl"]                   # lowest at the largest: go up
    assert add({"s": 2.1, "m": 2.0, "l": 2.1}) == ["xs"]                   # bracketed, 3 sizes: grow, below first
    assert add({"xs": 2.2, "s": 2.1, "m": 2.0, "l": 2.1}) == ["xl"]        # the side with fewer sizes
    assert add({"xxs": 2.3, "xs": 2.2, "s": 2.0, "m": 2.1, "l": 2.2}) == []  # 5 sizes, 16x: done
    assert add({"xxs": 2.0, "xs": 2.1, "s": 2.2}) == []                   # the ladder's end: nothing further
    # the valley runs into repeated text below: never further down
    assert add({"xs": 1.9, "s": 2.0, "m": 2.1, "l": 2.2}, xs=9.0) == []
