"""The IsoFLOP profiles' step of the chain (`seqbench.protocol.profiles`, `Chain.profiles`) and the scaling
report's marks (`seqbench.reports.frontier_scaling`): which size a profile runs next, which it never runs
(the text would repeat more than 4 times), and how the page marks a profile that cannot be read."""

from __future__ import annotations

import json
import math

import pytest

from seqbench.protocol import scaling_laws as sl
from seqbench.protocol.chain import Chain
from seqbench.protocol.final_cells import Experiment, final_commands
from seqbench.protocol.profiles import flops_per_token, plan
from seqbench.reports.frontier_scaling import markdown, optimum_rows, scale
from test_tuning_record import GPT, LSTM, grid, job

LADDER = ["xxs", "xs", "s", "m", "l"]
F = {"xxs": 1e6, "xs": 2e6, "s": 4e6, "m": 8e6, "l": 16e6}  # FLOPs per token, doubling along the ladder


def _point(size, loss, budget=1e12, tokens=1e6, family=LSTM, seeds=1):
    return sl.Point(family, budget, size, F[size], F[size] / 10, tuple(loss + 0.001 * i for i in range(seeds)),
                    budget / F[size] / tokens)


def test_the_flops_of_a_size_not_run_are_extrapolated_along_the_ladder():
    # bug caught: the ratio per ladder step taken over the whole gap (m/s, not (l/s)^(1/2)), or applied the
    # wrong way below the known sizes: xs would be predicted larger than s
    got = flops_per_token([_point("s", 1.0), _point("l", 1.0)], LADDER)
    assert got["xs"] == pytest.approx(2e6) and got["m"] == pytest.approx(8e6) and got["xxs"] == pytest.approx(1e6)


def test_a_valley_off_the_grid_asks_for_the_next_size_unless_it_would_repeat_the_text():
    # bugs caught: the predicted passes never compared with the data limit (a 1e13 run of xs on a small
    # corpus trained to measure repetition), or compared the wrong way (every needed size refused); a
    # finished profile asking for more; the ladder's end taken for done
    valley = [_point("s", 5.0), _point("m", 5.2), _point("l", 5.5)]
    assert plan(valley, valley, LADDER, tokens=10**6) == plan(valley, valley, LADDER, tokens=10**6)
    assert plan(valley, valley, LADDER, tokens=10**6).size == "xs"           # 1e12 / (2e6 x 1e6): 0.5 passes
    repeated = plan(valley, valley, LADDER, tokens=10**5)                   # 5 passes at xs
    assert (repeated.size, repeated.why, repeated.passes) == (None, "data-limited", pytest.approx(5.0))
    full = [_point(s, 5.0 + 0.1 * (i - 2) ** 2) for i, s in enumerate(LADDER)]
    assert plan(full, full, LADDER, tokens=10**6).why == "done"
    end = [_point(s, 5.0 + 0.1 * i) for i, s in enumerate(LADDER)]        # lowest at xxs, the ladder's end
    assert (plan(end, end, LADDER, tokens=10**6).size, plan(end, end, LADDER, tokens=10**6).why) == (None, "end of ladder")


def _size_run(sweep, n, family, lr, tokens, size, loss, budget, train_tokens):
    d = job(sweep, n, family, lr, tokens, loss=loss, budget=budget, corpus="shakespeare", heldout=True)
    metrics = json.loads((d / "metrics.json").read_text())
    metrics.update({"tune/size": size, "flops_per_token": F[size], "curve/tokens": budget / F[size],
                    "data/train_tokens": train_tokens})
    (d / "metrics.json").write_text(json.dumps(metrics))


def test_the_chain_grows_each_profile_by_one_size_at_its_tiers_setting_and_restores_what_the_size_step_ran(tmp_path):
    # bugs caught: the profile step planning a size the valley does not need (the bracketed GPT grown
    # anyway), one past the data limit (the LSTM's 1e13 xs, 20 passes), the size left out of
    # tune.per_family (the run would train the sweep's default size), the sweep not restoring from the
    # size step's archive (the xxs, xs runs of the five-size grid trained again)
    grid(tmp_path / "tune_frontier", LSTM, [1, 2], [256, 512], {(2, 512): 1.5}, corpus="shakespeare", heldout=True)
    grid(tmp_path / "tune_frontier", GPT, [1, 2], [256, 512], {(1, 256): 1.6}, start=4, corpus="shakespeare", heldout=True)
    sizes, n = tmp_path / "frontier_tuned_sizes", 0
    for budget in (1e12, 1e13):
        for size, loss in (("s", 1.0), ("m", 1.2), ("l", 1.5)):               # the LSTM's valley runs off below
            _size_run(sizes, n, LSTM, 2, 512, size, loss, budget, train_tokens=10**5)
            n += 1
        for size, loss in zip(LADDER, (1.5, 1.2, 1.0, 1.1, 1.4)):             # the GPT's is inside five sizes
            _size_run(sizes, n, GPT, 1, 256, size, loss, budget, train_tokens=10**5)
            n += 1
    sweeps = Chain("tune_frontier", tmp_path).profiles()
    # 1e12 / (2e6 x 1e5) = 5 passes at xs... is over the limit too: only a corpus ten times larger runs it
    assert sweeps == []
    for d in sizes.iterdir():
        m = json.loads((d / "metrics.json").read_text())
        (d / "metrics.json").write_text(json.dumps({**m, "data/train_tokens": 10**6}))
    (name, overrides), = Chain("tune_frontier", tmp_path).profiles()          # 1e13 xs: 5 passes, refused
    assert name == "frontier_tuned_sizes_profile_1e12_lstm_xs"
    assert "budget.flops=1e12" in overrides and "hydra.launcher.archive_from=[frontier_tuned_sizes]" in overrides
    assert f"tune.per_family={{{LSTM}:{{lr_scale:2,tokens_per_step:501,size:xs}}}}" in overrides
    assert f"preset=frontier/shakespeare/{LSTM}" in overrides


def test_the_size_step_runs_the_frontiers_grid_and_leaves_the_rest_of_the_ladder_to_the_profiles():
    # bug caught: the size step running the presets' whole ladder at every tier (on PTB, xxs at 1e13 reads
    # its text ten times: hours of CPU for points the profiles leave out)
    experiment = Experiment("tune_frontier_ptb")
    assert experiment.grid == ["s", "m", "l"] and experiment.sizes[:2] == ["xxs", "xs"]
    lines = final_commands({LSTM: {"lr_scale": 2, "tokens_per_step": 140}}, experiment)
    assert sum("size=s,m,l " in line for line in lines) == 1 and not any("xxs" in line for line in lines)


def test_the_page_marks_a_profile_whose_next_size_would_repeat_the_text_as_data_limited_and_names_no_optimum():
    # bugs caught: such a profile printed as bracketed at its edge, or as plainly unbracketed (as if more
    # compute would find its optimum); an optimum printed for an unbracketed profile
    valley = [_point("s", 5.0), _point("m", 5.2), _point("l", 5.5)]
    inside = [_point(s, 5.0 + 0.1 * (i - 2) ** 2, family=GPT) for i, s in enumerate(LADDER)]
    points = valley + inside
    nexts = {(LSTM, 1e12): plan(valley, valley, LADDER, tokens=10**5), (GPT, 1e12): plan(inside, inside, LADDER, 10**6)}
    rows = {r["family"]: r for r in optimum_rows(points, draws=50, nexts=nexts)}
    assert rows[LSTM]["status"] == sl.DATA_LIMITED and math.isnan(rows[LSTM]["loss"])
    assert rows[GPT]["status"] == sl.BRACKETED and rows[GPT]["loss"] == pytest.approx(5.0, abs=0.01)
    text = markdown("x", list(rows.values()), [], [], [], (True, math.nan, math.nan), "read")
    assert "**data-limited** (best measured s; 5 passes at the next size)" in text
    assert "| 1e12 | lstm | **data-limited**" in text and "| 1e12 | lstm | **data-limited** (best measured s; 5 passes at the next size) | 3 (4x) | 0.25 | — | — |" in text


def test_laws_fitted_below_the_held_out_tier_predict_it_and_say_where_a_challenger_crosses():
    # bugs caught: the verdict's sides swapped (a measured loss above the interval called below it), the
    # attention family compared with the attention side rather than the recurrent envelope
    def family_points(family, a, alpha, e=1.0):
        out = []
        for budget in (1e11, 1e12, 1e13, 1e14):
            best = e + a * budget ** -alpha
            for i, size in enumerate(LADDER if budget < 1e14 else ["s"]):
                off = 0.05 * (i - 2) ** 2 if budget < 1e14 else (0.5 if family == GPT else 0.0)  # GPT's 1e14 misses
                out.append(sl.Point(family, budget, size, F[size], F[size] / 10, (best + off,), 0.5))
        return out

    points = family_points(LSTM, 30.0, 0.15) + family_points(GPT, 30.0 * 10 ** 0.8, 0.2)
    found = scale(points, max_budget=1e13, draws=100)
    held = {r["family"]: r for r in found["heldout"]}
    assert set(held) == {LSTM, GPT} and all(r["budget"] == 1e14 for r in held.values())
    assert held[GPT]["verdict"] == "above the interval" and held[GPT]["miss"] > 0.4
    assert held[LSTM]["verdict"] == "inside" and held[LSTM]["predicted"] == pytest.approx(1 + 30 * 1e14 ** -0.15, abs=0.02)
    (cross,) = found["crossover"]
    truth = 1e16                                    # where 30 C^-0.15 = 30 x 10^0.8 C^-0.2
    assert cross["attention"] == GPT and cross["recurrent"] == LSTM and cross["status"] == sl.CROSSES
    assert math.log10(cross["compute"]) == pytest.approx(math.log10(truth), abs=0.1)
