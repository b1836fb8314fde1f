"""The verdict at scale, per corpus: IsoFLOP profiles, compute laws, the held-out tier and the crossover.

    python -m seqbench.reports.frontier_scaling tune_frontier_ptb --root outputs/sweeps \\
        --report experiments/figures/scaling-ptb

Reads the tuning chain's final cells (`seqbench.reports.frontier_tuned.after_runs`: the size sweeps and
their profile extensions, the seeds, the tier beyond, each at the setting its tier trains with) and writes

    profiles.csv    every (family, tier, size) cell: FLOPs per token, parameters, seeds, mean selection loss,
                    passes over the training text
    optima.csv      each profile's optimum, or why it has none (unbracketed, data-limited, too few sizes),
                    with its bootstrap interval
    laws.csv        each family's L*(C) = E + A·C^(−α) and size exponents with intervals, fitted to the
                    optima of the frontier's tiers; E shared or per family, as the held-out comparison chose
    heldout.csv     the tier beyond the frontier against each law's predicted interval
    crossover.csv   each attention family against the recurrent families' lower envelope
    scaling.md      the tables, read by the frontier page and the findings
    scaling.png     loss against compute: the profiles' optima with their intervals, the laws to 1e18 with bands

Every loss here is the selection loss (validation; on Tiny Shakespeare the validation tenth's first half):
the laws choose the sizes of the tier beyond, so they read what selection reads; the held-out scores of the
verdict stay on frontier.md. `seqbench.protocol.scaling_laws` says what each mark means.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

import numpy as np

from seqbench.families import colour, kind_of, order
from seqbench.protocol import scaling_bootstrap as sb
from seqbench.protocol import scaling_laws as sl
from seqbench.protocol.chain import Chain
from seqbench.protocol.final_cells import Experiment, flops_text
from seqbench.protocol.profiles import Next, plan, points_of, train_tokens
from seqbench.provenance import command_line, hardware, utc_now, write_record
from seqbench.reports.frontier_tuned import after_runs
from seqbench.tables import loss_text, table

DRAWS = 1000
PLOT_HORIZON = 1e18


# -- the tables ----------------------------------------------------------------------------------------
def _e(x: float, digits: int = 2) -> str:
    return "" if x is None or not math.isfinite(x) else f"{x:.{digits}e}"


def _range(lo: float, hi: float, fmt) -> str:
    return "" if not (math.isfinite(lo) and math.isfinite(hi)) else f"{fmt(lo)} – {fmt(hi)}"


def profile_rows(points: list[sl.Point]) -> list[dict]:
    return [{"family": p.family, "budget": p.budget, "size": p.size, "flops_per_token": int(p.flops_per_token),
             "params_non_embedding": int(p.params), "seeds": len(p.losses), "loss": round(p.loss, 4),
             "passes": round(p.passes, 2), "data_limited": p.data_limited} for p in points]


def optimum_rows(points: list[sl.Point], draws: int, nexts: dict[tuple[str, float], Next] | None = None,
                 seed: int = 0) -> list[dict]:
    """Each profile's optimum and its 95 % bootstrap interval (sizes and seeds resampled); `nexts`: what each
    profile still needs (`seqbench.protocol.profiles.plan`), so that a valley that runs off its grid towards
    sizes that would repeat the text is marked data-limited, not merely unbracketed."""
    nexts = nexts or {}
    rng, sd = np.random.default_rng(seed), sl.pooled_seed_sd(points)
    rows = []
    for (family, budget), group in sorted(sl.profiles(points).items(), key=lambda kv: (kv[0][1], order([kv[0][0]]))):
        o = sl.optimum(group)
        d = sb.profile_draws(group, draws, rng, sd)
        ok = d.ok
        step = nexts.get((family, budget))
        status = sl.DATA_LIMITED if o.status == sl.UNBRACKETED and step is not None and step.why == "data-limited" else o.status
        rows.append({"family": family, "budget": budget, "status": status, "edge": o.edge, "sizes": o.sizes,
                     "next": "" if step is None else (step.size or step.why),
                     "next_passes": round(step.passes, 2) if step is not None and math.isfinite(step.passes) else math.nan,
                     "span": round(o.span, 1), "best_measured": o.best,
                     "passes_max": round(max(p.passes for p in group), 2),
                     "loss": o.loss, "loss_lo": sl.interval(d.loss[ok])[0], "loss_hi": sl.interval(d.loss[ok])[1],
                     "flops_per_token": 10 ** o.log_f if o.usable else math.nan,
                     "params_non_embedding": 10 ** o.log_n if o.usable else math.nan,
                     "params_lo": 10 ** sl.interval(d.log_n[ok])[0], "params_hi": 10 ** sl.interval(d.log_n[ok])[1],
                     "bracketed_draws": round(float(ok.mean()), 3)})
    return rows


def choose_e(points: list[sl.Point], max_budget: float) -> tuple[bool, float, float]:
    """(shared, error shared, error per family): one E per corpus unless one per family predicts the held-out
    optima (leave one budget out) better; one per family needs three budgets a family, so with fewer the
    shared E is the only fit and its error the only one measured."""
    shared = sl.held_out_error(points, True, max_budget)
    own = sl.held_out_error(points, False, max_budget)
    return (not (math.isfinite(own) and own < shared)), shared, own


def law_rows(points, laws: dict[str, sl.Law], draws: sb.LawDraws, max_budget: float) -> list[dict]:
    series = sl.series_of(sl.optima_of(points, max_budget))
    rows = []
    for family in order(laws):
        law = laws[family]
        budgets, _, log_f, log_n = series[family]
        a_f = sl.fit_size_exponent(budgets, log_f)[0] if len(budgets) >= 2 else math.nan
        a_n = sl.fit_size_exponent(budgets, log_n)[0] if len(budgets) >= 2 else math.nan
        rows.append({"family": family, "kind": kind_of(family), "budgets": len(budgets), "E": law.E, "A": law.A,
                     "alpha": law.alpha, "alpha_lo": sl.interval(draws.alpha.get(family, []))[0],
                     "alpha_hi": sl.interval(draws.alpha.get(family, []))[1],
                     "size_exponent": a_f, "param_exponent": a_n,
                     "param_exponent_lo": sl.interval(draws.param_exponent.get(family, []))[0],
                     "param_exponent_hi": sl.interval(draws.param_exponent.get(family, []))[1]})
    return rows


def heldout_rows(points, laws, draws: sb.LawDraws, max_budget: float) -> list[dict]:
    """Each family's best measured cell at every tier beyond `max_budget` against its law's interval there.
    The tier beyond trains each family at the size its profile chose, so the measured loss is an upper
    bound on that tier's optimum: a law is refuted by a measured loss below its interval, and one above it
    says the size or the law missed."""
    rows = []
    for (family, budget), group in sorted(sl.profiles(points).items()):
        if budget <= max_budget or family not in laws:
            continue
        best = min(group, key=lambda p: p.loss)
        lo, hi = sl.interval(draws.loss_at(family, budget))
        predicted = float(laws[family](budget))
        verdict = "inside" if lo <= best.loss <= hi else ("below the interval" if best.loss < lo else "above the interval")
        rows.append({"family": family, "budget": budget, "size": best.size, "seeds": len(best.losses),
                     "measured": best.loss, "measured_sd": float(np.std(best.losses, ddof=1)) if len(best.losses) > 1 else math.nan,
                     "predicted": predicted, "predicted_lo": lo, "predicted_hi": hi,
                     "miss": 0.0 if verdict == "inside" else best.loss - (hi if best.loss > hi else lo),
                     "passes": round(best.passes, 2), "verdict": verdict})
    return rows


def crossover_rows(laws, draws: sb.LawDraws, start: float) -> list[dict]:
    """Each attention family against the lower envelope of the recurrent families' laws."""
    recurrent = [f for f in order(laws) if kind_of(f) == "recurrent"]
    rows = []
    for family in (f for f in order(laws) if kind_of(f) == "attention"):
        if not recurrent:
            break
        status, where = sl.crossing(laws[family], [laws[f] for f in recurrent], start)
        found = sb.crossing_draws(draws, family, recurrent, start)
        found = found[np.isnan(found) == False]  # noqa: E712 (numpy)
        beyond = float(np.mean(np.isinf(found))) if found.size else math.nan
        # a draw that never crosses counts as beyond the horizon: its percentile is read as such, not as nan
        capped = np.where(np.isinf(found), sl.HORIZON * 10, found)
        lo, hi = ([v if v <= sl.HORIZON else math.inf for v in np.percentile(capped, [2.5, 97.5])]
                  if found.size else (math.nan, math.nan))
        rows.append({"attention": family, "recurrent": "+".join(recurrent), "status": status, "compute": where,
                     "compute_lo": float(lo), "compute_hi": float(hi), "draws_never": round(beyond, 3)})
    return rows


def _crossing_text(row: dict) -> str:
    lo, hi = row["compute_lo"], row["compute_hi"]
    if math.isinf(lo):
        band = f"over 97.5 % of the draws never cross before {sl.HORIZON:.0e}"
    elif math.isnan(lo):
        band = "no draw fitted"
    else:
        band = f"{lo:.1e} – " + (f"{hi:.1e}" if math.isfinite(hi) else f"beyond {sl.HORIZON:.0e}")
    if row["status"] == sl.CROSSES:
        return f"crosses at {row['compute']:.1e} FLOPs (95 %: {band})"
    if row["status"] == sl.AHEAD:
        return f"crossed below the first tier (ahead there; 95 %: {band})"
    return f"no crossing before {sl.HORIZON:.0e} FLOPs ({row['draws_never']:.1%} of the draws never cross; 95 %: {band})"


def _profile_text(r: dict) -> str:
    """A profile's mark and what it still needs, in words."""
    best = f"best measured {r['best_measured']}" if r["best_measured"] else ""
    edge = {"below": "its smallest", "above": "its largest"}.get(r["edge"], "")
    if r["status"] == sl.BRACKETED:
        short = r["sizes"] < sl.MIN_SIZES or r["span"] < sl.MIN_SPAN
        todo = f"; next: {r['next']}" if r["next"] and r["next"] not in ("done", "end of ladder", "data-limited") else ""
        return f"bracketed ({best}" + (f"; short of {sl.MIN_SIZES} sizes over {sl.MIN_SPAN:g}x{todo}" if short else "") + ")"
    if r["status"] == sl.DATA_LIMITED:
        if not best:
            return f"**data-limited** (fewer than three sizes under {sl.DATA_LIMIT:g} passes)"
        why = (f"; {r['next_passes']:g} passes at the next size" if math.isfinite(r["next_passes"]) else "")
        return f"**data-limited** ({best}{why})"
    if r["status"] == sl.UNBRACKETED:
        todo = "the ladder ends" if r["next"] == "end of ladder" else f"next: {r['next']}" if r["next"] else ""
        return f"**unbracketed** ({best}, {edge} size{'; ' + todo if todo else ''})"
    return r["status"]


def markdown(corpus: str, optima: list[dict], laws: list[dict], heldout: list[dict], crossings: list[dict],
             e_choice: tuple[bool, float, float], read: str) -> str:
    shared, err_shared, err_own = e_choice
    opt_table = table(
        ["tier", "family", "profile", "sizes (span)", "max passes", "optimal loss (95 %)", "optimal params (95 %)"],
        [[flops_text(r["budget"]), r["family"],
          _profile_text(r),
          f"{r['sizes']} ({r['span']:g}x)", f"{r['passes_max']:g}",
          (f"{loss_text(r['loss'])} ({_range(r['loss_lo'], r['loss_hi'], loss_text)})" if r["status"] == sl.BRACKETED else "—"),
          (f"{r['params_non_embedding']:,.0f} ({_range(r['params_lo'], r['params_hi'], lambda v: f'{v:,.0f}')})"
           if r["status"] == sl.BRACKETED else "—")] for r in optima], "lllrrrr")
    text = [f"## The verdict at scale: {corpus}", "", "### IsoFLOP profiles", "",
            "Each (family, tier): its sizes' mean selection loss against log FLOPs per token, a parabola through the "
            "lowest clean point and its neighbours (`seqbench.protocol.scaling_laws.optimum`). **Unbracketed**: the lowest "
            f"loss is at the grid's edge, no optimum is read. **Data-limited**: over {sl.DATA_LIMIT:g} passes over the "
            "training text. Intervals: 1,000 bootstrap draws over sizes and seeds.", "", opt_table, ""]
    text += ["### Compute laws", ""]
    if laws:
        text += [f"L*(C) = E + A·C^(−α) per family, fitted to the bracketed optima; E **{'shared by the corpus' if shared else 'per family'}** "
                 f"(leave-one-tier-out error {err_shared:.3f} nats shared, "
                 + (f"{err_own:.3f} per family" if math.isfinite(err_own) else "per family not measurable: a family needs three bracketed tiers")
                 + "). N*(C) ∝ C^b: the optimal non-embedding parameters."
                 + (" E sits at its lower bound 0: the optima do not curve yet over these tiers, so each law is a pure "
                    "power law and its extrapolation the most optimistic one." if all(r["E"] < 1e-6 for r in laws) else ""), "",
                 table(["family", "kind", "tiers", "E", "A", "α (95 %)", "b (95 %)"],
                       [[r["family"], r["kind"], r["budgets"], f"{r['E']:.3f}", _e(r["A"]),
                         f"{r['alpha']:.3f} ({_range(r['alpha_lo'], r['alpha_hi'], lambda v: f'{v:.3f}')})",
                         f"{r['param_exponent']:.2f} ({_range(r['param_exponent_lo'], r['param_exponent_hi'], lambda v: f'{v:.2f}')})"
                         if math.isfinite(r["param_exponent"]) else "—"] for r in laws], "llrrrrr"), ""]
    else:
        text += ["No family has two bracketed tiers yet: no law is fitted.", ""]
    text += ["### The held-out tier", ""]
    if heldout:
        text += ["The tier beyond the fitted ones, each family at one size (its measured loss bounds the optimum from "
                 "above), against its law's 95 % interval.", "",
                 table(["tier", "family", "size", "seeds", "passes", "measured", "predicted (95 %)", "verdict"],
                       [[flops_text(r["budget"]), r["family"], r["size"], r["seeds"], f"{r['passes']:g}", loss_text(r["measured"]),
                         f"{loss_text(r['predicted'])} ({_range(r['predicted_lo'], r['predicted_hi'], loss_text)})",
                         r["verdict"] + (f" by {abs(r['miss']):.3f}" if r["miss"] else "")] for r in heldout], "lllrrrrl"), ""]
    else:
        text += ["No family with a law has run the tier beyond yet.", ""]
    text += ["### The crossover", ""]
    if crossings:
        text += ["Each attention family's law against the lower envelope of the recurrent families' laws (the best "
                 "recurrent family at each compute), from the first fitted tier to 1e20 FLOPs; the interval from the "
                 "bootstrap's draws.", "",
                 table(["attention", "against", "where the laws cross"],
                       [[r["attention"], r["recurrent"].replace("+", ", "), _crossing_text(r)] for r in crossings]), ""]
    else:
        text += ["Needs laws on both sides: not yet.", ""]
    return "\n".join(text + ["", read, ""])


# -- the figure ----------------------------------------------------------------------------------------
def plot(points, optima: list[dict], laws: dict[str, sl.Law], draws: sb.LawDraws | None, path: Path, title: str) -> None:
    """Loss against compute: each profile's measured cells faint (seeds' spread as bars), its optimum with
    its interval, each law and its 95 % band extrapolated to `PLOT_HORIZON`. The y axis spans the optima
    and the laws, not every trial, so the gaps that decide the verdict are readable."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    families = order({p.family for p in points})
    for family in families:
        c = colour(family, "gray")
        mine = [p for p in points if p.family == family]
        ax.errorbar([p.budget * (1 + 0.04 * (i % 5 - 2)) for i, p in enumerate(mine)], [p.loss for p in mine],
                    yerr=[np.std(p.losses, ddof=1) if len(p.losses) > 1 else 0 for p in mine],
                    fmt="o", ms=2.5, color=c, alpha=0.25, lw=0.6)
        ok = [r for r in optima if r["family"] == family and r["status"] == sl.BRACKETED]
        if ok:
            ax.errorbar([r["budget"] for r in ok], [r["loss"] for r in ok],
                        yerr=[[max(r["loss"] - r["loss_lo"], 0) for r in ok], [max(r["loss_hi"] - r["loss"], 0) for r in ok]],
                        fmt="D", ms=5, color=c, capsize=3, label=f"{family} optimum")
        if family in laws:
            start = min(r["budget"] for r in ok) if ok else min(p.budget for p in mine)
            grid = np.logspace(math.log10(start), math.log10(PLOT_HORIZON), 200)
            ax.plot(grid, laws[family](grid), color=c, lw=1.2, ls="--" if kind_of(family) == "attention" else "-")
            if draws is not None and family in draws.alpha:
                band = draws.loss_at(family, grid)
                band = band[np.isfinite(band).all(1)]
                if len(band):
                    lo, hi = np.percentile(band, [2.5, 97.5], axis=0)
                    ax.fill_between(grid, lo, hi, color=c, alpha=0.12, lw=0)
    lows = [r["loss_lo"] for r in optima if r["status"] == sl.BRACKETED and math.isfinite(r["loss_lo"])]
    bests = [min(p.loss for p in points if p.family == f and p.budget == b) for f, b in sl.profiles(points)]
    if bests:
        top = max(bests) + 0.15
        bottom = min(lows + bests + [float(law(PLOT_HORIZON)) for law in laws.values()]) - 0.1
        ax.set_ylim(bottom, top)
    ax.set_xscale("log")
    ax.set_xlabel("training FLOPs (head included)")
    ax.set_ylabel("selection loss (nats per token)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both", lw=0.4)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        path.write_text("")
        return
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def scale(points: list[sl.Point], max_budget: float, draws: int = DRAWS,
          nexts: dict[tuple[str, float], Next] | None = None) -> dict:
    """Everything the page shows, from the points: the optima of the tiers up to `max_budget`, the laws
    fitted to them (E shared or per family, by held-out error) and their draws, the tiers above held out
    against the laws, and the crossings."""
    fitted = [p for p in points if p.budget <= max_budget]
    e_choice = choose_e(fitted, max_budget)
    laws = sl.laws_of(fitted, e_choice[0], max_budget)
    law_draws = sb.bootstrap(fitted, draws, e_choice[0], max_budget) if laws else None
    start = min((p.budget for p in fitted), default=max_budget)
    return {"optima": optimum_rows(fitted, draws, nexts), "laws": law_rows(fitted, laws, law_draws, max_budget) if laws else [],
            "law_objects": laws, "draws": law_draws, "e_choice": e_choice,
            "heldout": heldout_rows(points, laws, law_draws, max_budget) if laws else [],
            "crossover": crossover_rows(laws, law_draws, start) if laws else []}


def next_sizes(points: list[sl.Point], runs, ladder: list[str], max_budget: float) -> dict[tuple[str, float], Next]:
    """What each profile up to `max_budget` still needs, as the chain's profile step plans it."""
    tokens = {r.family: train_tokens(r) for r in runs}
    out = {}
    for (family, budget), group in sl.profiles(p for p in points if p.budget <= max_budget).items():
        out[(family, budget)] = plan(group, [p for p in points if p.family == family], ladder, tokens[family])
    return out


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m seqbench.reports.frontier_scaling", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", help="the tuning experiment: tune_frontier, tune_frontier_ptb, tune_frontier_enwik8")
    parser.add_argument("--root", type=Path, default=Path("outputs/sweeps"), help="where the chain's sweeps are")
    parser.add_argument("--report", type=Path, help="write the CSVs, scaling.md and scaling.png here")
    parser.add_argument("--draws", type=int, default=DRAWS, help="bootstrap draws")
    args = parser.parse_args(argv)
    started = time.time()
    chain = Chain(args.experiment, args.root)
    runs = after_runs(chain)[0]
    experiment = Experiment(args.experiment)
    highest = max(experiment.tiers())
    points = points_of(runs)
    if not points:
        raise SystemExit(f"no completed final-cell run under {args.root} for {args.experiment}: nothing to write")
    found = scale(points, highest, args.draws, next_sizes(points, runs, experiment.sizes, highest))
    read = (f"Read at {utc_now()} from the final cells of {args.experiment} under {args.root}: {len(runs)} runs, "
            f"{len(points)} (family, tier, size) cells; laws fitted up to {flops_text(highest)}, the tiers above held out. "
            f"Machine of this page: {hardware()}.")
    text = markdown(args.experiment, found["optima"], found["laws"], found["heldout"], found["crossover"], found["e_choice"], read)
    print(text)
    if args.report:
        args.report.mkdir(parents=True, exist_ok=True)
        tables = {"profiles.csv": profile_rows(points), "optima.csv": found["optima"], "laws.csv": found["laws"],
                  "heldout.csv": found["heldout"], "crossover.csv": found["crossover"]}
        for name, rows in tables.items():
            _write_csv(args.report / name, rows)
        (args.report / "scaling.md").write_text(f"# The verdict at scale: {args.experiment}\n\n{text}", encoding="utf-8")
        plot(points, found["optima"], found["law_objects"], found["draws"], args.report / "scaling.png",
             f"{args.experiment}: IsoFLOP optima and compute laws (bands: 95 % bootstrap)")
        write_record(args.report, [*tables, "scaling.md", "scaling.png"],
                     command_line("seqbench.reports.frontier_scaling", argv or sys.argv[1:]), started)
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
