"""Equal-budget tuning: the same search, by the same rules, for every family (`tune:` in a config;
a job applies its setting with `seqbench.training.tune`), and the search's result and cost.

Melis, Dyer & Blunsom (2018) gave every architecture the same black-box tuning budget, and a plain
LSTM beat models reported better. The recipes here are not equal in that sense: the recurrent ones
come from papers, the attention ones are single guesses, and the families take different tokens per
step. `experiment=tune_frontier` (and `tune_frontier_ptb`) sweep one grid for every family through
this block, applied to the composed config before anything is built:

- `lr_scale`: the family's recipe learning rate times this factor. The optimizers differ (PTB's
  recurrent nets use SGD at lr 20, GPT AdamW at 1e-3), so one absolute grid would be a different
  search per family; the same multiplicative grid around each recipe is the same search in log space.
- `tokens_per_step`: training tokens per optimizer step, the same absolute values for every family:
  recurrent nets get `round(tokens / bptt)` streams at their fixed BPTT, attention nets
  `round(tokens / context)` windows (`train_batch_shape` says which length a model reads).
- `schedule`: one `model.scheduler` node that replaces every family's own, so every run's rate ends
  at its budget (a cosine over `max_steps`, which `budget.flops` sets), not a per-epoch decay that a
  short budget never reaches.
- `gradient_clip_val`: one clipping norm for every family where set.
- `per_family`: `{family: {lr_scale, tokens_per_step, size}}`, the tuned setting of each family
  (`python -m seqbench.protocol.tuning <sweep dirs>` prints it), for the runs that use the search's result;
  `size` (one of the frontier preset's `sizes` keys) replaces the run's `size`, so one sweep over the
  families trains each at its own chosen size.

Commands:

    python -m seqbench.protocol.tuning <search sweep dirs>       # trials, cost, best setting per family
    python -m seqbench.protocol.tuning <search sweep dirs> --report <folder> [--baseline <untuned sweep dirs>]
    python -m seqbench.protocol.final_cells <search sweep dirs> [--sizes <size-selection sweep dirs>]

`--report` (`seqbench.protocol.tuning_report`) writes the committed record of the search, partial or
complete: one row per trial, the summary with each family's grid edge and untuned loss, heatmaps.
`seqbench.protocol.final_cells` prints the final cells' sweeps: without `--sizes`, the ones that run
every size once (seed 1234), each tier at each family's setting there (the tuned one, or the one the
transfer check moved it to); with it, one per budget tier that runs seeds 2 and 3 of each family's size
chosen at that tier on the selection loss.

What was applied goes into the run's record as `tune/...`, so the search's summary (and its cost:
trials and wall time per family) is read from the runs alone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from omegaconf import OmegaConf

from seqbench.protocol.tuning_extension import commands
from seqbench.protocol.tuning_report import write
from seqbench.protocol.tuning_search import searches
from seqbench.protocol.tuning_trials import from_run, planned, read_trials
from seqbench.provenance import command_line
from seqbench.tables import table_lines
from seqbench.training.record import read_runs


# -- the search's result and cost -----------------------------------------------------------------
def summary(runs) -> list[dict]:
    """Per (family, size, budget) searched, from the tuning runs among `runs` (`seqbench.training.record.Run`):
    trials, failures (diverged included), total cost (`seqbench.training.clocks.run_seconds`: a one-core CPU
    trial's CPU seconds, else its wall seconds) and wall time, and the best setting by the selection loss
    and the median loss of the completed trials. The runs are grouped and judged as the search's
    record judges them (`seqbench.protocol.tuning_search.searches`): a diverged trial is never the best."""
    return rows(searched(runs))


def rows(searches: list) -> list[dict]:
    """`summary`'s rows for `Search`es already read (`searched`)."""
    return [_row(search) for search in searches]


def searched(runs) -> list:
    """The tuning runs among `runs` as `seqbench.protocol.tuning_search.Search`es, one per (corpus,
    family, size, budget) searched."""
    return searches([from_run(r) for r in runs
                     if r.metrics.get("tune/lr_scale") is not None or r.metrics.get("tune/tokens_per_step") is not None])


def _row(search) -> dict:
    best, trials = search.best, search.trials
    return {"family": search.family, "params": next((t.params for t in trials if t.params is not None), None),
            "budget": search.budget, "trials": len(trials), "failed": len(trials) - len(search.candidates),
            "wall_time_s": search.wall_time_s, "cost_s": search.cost_s, "best_loss": best.loss if best else None,
            "best": {"lr_scale": best.lr_scale, "tokens_per_step": _tokens(best)} if best else None,
            "median_loss": search.median_loss, "gaps": search.gaps, "learned_nothing": search.learned_nothing}


def _tokens(trial) -> int | None:
    """The tokens the trial's steps held (whole streams or windows: the same rows when asked for again),
    where the search set them; None (the recipe's own batch) where it did not."""
    return trial.tokens_per_step if trial.tokens_grid is not None else None


def _loss(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def markdown(rows: list[dict]) -> str:
    head = ["family", "non-emb params", "budget", "trials", "failed", "cost (core-s)", "wall time (s)", "best lr x",
            "best tokens/step", "best loss", "median loss"]
    def cells(r: dict) -> list:
        b = r["best"] or ({"lr_scale": "none learned (recipe's x 1)"} if r.get("learned_nothing") else {})
        return [r["family"], r["params"] or "–", f"{r['budget']:.0e}" if r["budget"] else "–", r["trials"], r["failed"],
                f"{r['cost_s']:,.0f}", f"{r['wall_time_s']:,.0f}", b.get("lr_scale") or "–",
                b.get("tokens_per_step") or "–", _loss(r["best_loss"]), _loss(r["median_loss"])]

    lines = table_lines(head, (cells(r) for r in rows))
    gaps = sorted({g for r in rows for g in r.get("gaps") or ()})
    if len(gaps) > 1:
        lines += ["", f"Searched at the gaps T = {', '.join(map(str, gaps))}: the best setting is the one with the "
                      "lowest mean selection loss over them (one rate per family for every gap), its mean the best loss."]
    return "\n".join(lines)


def per_family(rows: list[dict]) -> dict:
    """`tune.per_family` for the runs that use the result: each family's best setting (the searched
    size and budget with the most trials, where a family was searched at several)."""
    out: dict[str, dict] = {}
    for r in sorted(rows, key=lambda r: r["trials"]):
        if r["best"]:
            out[r["family"]] = dict(r["best"])
    return out


def _print_extension(dirs: list[Path]) -> None:
    """The protocol's grid-edge rule, applied to the grid as it stands (seqbench.protocol.tuning_extension).
    The protocol extends once: a best on the extended grid's edge is reported, not chased."""
    plans: dict = {}
    for sweep in dirs:
        for key, points in (planned(sweep) or {}).items():
            plans.setdefault(key, set()).update(points)
    lines = commands(searches(read_trials(dirs), plans), dirs)
    if lines:
        print("\n# The grid-edge rule: one step beyond every edge a family's best lies on, for every family "
              "of the corpus (once)")
        print("\n".join(lines))


def main(argv: list[str] | None = None) -> list:
    """`<dirs>`: the search's table and `tune.per_family` (the final cells' sweeps: `seqbench.protocol.final_cells`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m seqbench.protocol.tuning",
                                     description="The equal-budget search's result and cost per family "
                                                 "(the final cells' sweeps: python -m seqbench.protocol.final_cells).")
    parser.add_argument("dirs", nargs="+", type=Path, help="the tuning sweeps' directories (a base grid and its "
                        "extensions merge into one grid per family)")
    parser.add_argument("--report", type=Path, help="write trials.csv, summary.md, the grid's heatmaps and their "
                        "ledger record here (seqbench.protocol.tuning_report), e.g. experiments/figures/tuning-ptb")
    parser.add_argument("--baseline", nargs="+", type=Path, help="with --report: a sweep of each family's untuned "
                        "recipe under the same experiment (tune.schedule=null, lr x 1, its own tokens per step)")
    args = parser.parse_args(argv)
    if args.baseline and not args.report:
        parser.error("--baseline is compared in the --report's summary: give --report too")
    if args.report:
        write(args.report, args.dirs, args.baseline, command_line("seqbench.protocol.tuning", argv))
        print(f"wrote {args.report}/summary.md, trials.csv and the grid's heatmaps")
    rows = summary(read_runs(args.dirs))
    print(markdown(rows))
    _print_extension(args.dirs)
    print("\n# tune.per_family for the runs that use the result:")
    print(OmegaConf.to_yaml(OmegaConf.create({"tune": {"per_family": per_family(rows)}})))
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
