"""Aggregate finished runs into one comparison: a markdown table and PNG plots.

    python -m seqbench.reports.report outputs/multiruns/<time>              # one sweep (or several dirs)
    python -m seqbench.reports.report outputs/multiruns/<time> --target-ppl 150 --out experiments/figures/ptb
    python -m seqbench.reports.report --wandb-group <group>                  # the same, from W&B (online only)

Every job directory of a sweep holds its record (`seqbench.training.record`: final numbers, parameter counts, tokens/s, peak
memory), `csv/metrics.csv` (the history: `val/ppl` with `curve/tokens` and the training clocks at
each validation, from `seqbench.callbacks.LearningCurve`) and `.hydra/` (which model/family it was).
Runs are grouped by family (`preset=`, else `model=`), and seeds of a family are summarised
as mean ± sample standard deviation; where a family's runs differ in size or FLOPs budget (a frontier
sweep) the table gives each of those configurations its own row. A failed job appears in the page with its error.

The table's validation perplexity is that of the best checkpoint (the lowest `val/ppl` of the
history, the one `test/ppl` was measured on). "Time to target" is the training time (validation
excluded) at the first validation whose perplexity is at or below the target. One clock for the whole
table (`seqbench.training.clocks.common_clock`): CPU seconds where every run was a one-thread CPU run that
recorded them, wall seconds for every run otherwise, named in the column header. By default the
target is the worst of the families' best mean perplexities, so every family reaches it on average (a
run of that family worse than its mean may not; the column then says how many did). Plots: validation
perplexity against training time and against training tokens seen, one line per run, one colour per
family; best validation perplexity against non-embedding parameters. Runs that count their training
FLOPs (`train/flops`) add the compute-efficient frontier (`seqbench.reports.frontier`, `experiment=frontier`):
validation loss against FLOPs and against training time, each family's lower envelope in bold, and
the best loss per family and the winner at each budget (`--budgets`), with the crossover, and the same
at budgets of training time (`--time-budgets`).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

from seqbench.identity import preset_name
from seqbench.provenance import command_line, write_record
from seqbench.reports.frontier import config_label
from seqbench.reports.frontier import section as frontier_section
from seqbench.reports.report_plots import plot_curves, plot_params
from seqbench.tables import mean_std, table_lines
from seqbench.training.clocks import CPU_CLOCK, WALL_CLOCK, clock_name, common_clock, wall_seconds
from seqbench.training.record import CURVE_KEYS, Run, read_runs, run_setting, run_setting_text


def read_wandb(group: str, project: str, entity: str | None) -> list[Run]:
    """The runs of a W&B group, read through the public API; needs a key and the network."""
    from seqbench.training.loggers import resolve_mode  # Lightning's loggers: loaded only for W&B, not for every report

    if resolve_mode("auto") != "online":
        raise SystemExit("W&B is offline here (no API key or no network): report on the local multirun "
                         "directory instead, or run `wandb sync` and report from a machine that is online.")
    import wandb

    api = wandb.Api()
    path = f"{entity}/{project}" if entity else project
    runs = []
    for r in api.runs(path, filters={"group": group}):
        # LearningCurve logs its columns in the same step as val/ppl, so they share history rows
        curve = [{k: row.get(k) for k in CURVE_KEYS} for row in r.scan_history(keys=list(CURVE_KEYS))]
        summary = {k: v for k, v in r.summary.items() if not k.startswith("_")}
        summary.setdefault("status", "completed" if r.state == "finished" else r.state)
        for key in ("params", "params_non_embedding"):
            summary.setdefault(key, r.config.get(key))
        # the record's names for what W&B holds as the RunStats metric and the run's own runtime
        summary.setdefault("tokens_per_s", summary.get("train/tokens_per_s"))
        summary.setdefault("wall_time_s", r.summary.get("_runtime"))
        family = preset_name(r.config.get("family") or r.name.split("-")[0])
        runs.append(Run(r.name, family, summary, curve))
    if not runs:
        raise SystemExit(f"no W&B runs in group {group!r} of project {path!r}")
    return runs


# -- summarising --------------------------------------------------------------------------------
def families(runs: list[Run]) -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for run in runs:
        if not run.failed:
            out.setdefault(run.family, []).append(run)
    return out


def configurations(runs: list[Run]) -> dict[str, list[Run]]:
    """The table's rows: a family's runs, split by size and budget where they differ. A frontier sweep
    trains every family at several sizes to several FLOPs budgets; one mean ± sd over all of them
    would mix a 50k-parameter 1e11 run with a 0.8M 1e13 one and mean nothing, so each (non-embedding
    parameters, budget) of a family is its own row ("lstm 0.2M @ 1e+12") and only its seeds are
    summarised; where a size and budget trained at several tuned settings (the search's trials, or a
    tier's final runs beside those the transfer check superseded), each setting is its own row. A family
    at one size, budget and setting keeps its plain name."""
    out: dict[str, list[Run]] = {}
    for family, rs in families(runs).items():
        keys = {(r.metrics.get("params_non_embedding"), r.metrics.get("budget/flops"), run_setting(r.metrics)) for r in rs}
        for r in rs:
            if len(keys) == 1:
                out.setdefault(family, []).append(r)
                continue
            params, budget, setting = r.metrics.get("params_non_embedding"), r.metrics.get("budget/flops"), run_setting(r.metrics)
            name = config_label(family, params, budget)
            if sum(k[:2] == (params, budget) for k in keys) > 1:  # seeds of one setting, never two settings pooled
                name += f" ({run_setting_text(setting)})"
            out.setdefault(name, []).append(r)
    return out


def default_target(groups: dict[str, list[Run]]) -> float | None:
    """The worst family's best mean perplexity: the lowest target every family reaches."""
    bests = [mean_std([r.best_val_ppl() for r in rs])[0] for rs in groups.values()]
    bests = [b for b in bests if b is not None]
    return max(bests) if bests else None


def _fmt(mean: float | None, std: float | None = None, digits: int = 1) -> str:
    if mean is None:
        return "–"
    text = f"{mean:,.{digits}f}"
    return f"{text} ± {std:,.{digits}f}" if std is not None else text


def scored_context(metrics: dict) -> str:
    """What each family's valid/test tokens are predicted from, so that a reader sees whether the
    comparison gave one family less context (LanguageModelDataModule.eval_context)."""
    if metrics.get("eval/min_context") is not None:
        return f"≥ {int(metrics['eval/min_context']):,} tokens (window)"
    if metrics.get("eval/column_tokens") is not None:
        return f"all before it (state over {int(metrics['eval/column_tokens']):,}-token columns)"
    return "–"


def summary_rows(groups: dict[str, list[Run]], target: float | None, clock: str = WALL_CLOCK) -> list[dict]:
    """The numbers behind the table, one row per family (or configuration), best mean validation
    perplexity first: means and sample standard deviations over seeds, None where nothing was measured."""
    out = []
    for name, rs in sorted(groups.items(), key=lambda kv: mean_std([r.best_val_ppl() for r in kv[1]])[0] or math.inf):
        def stat(key: str) -> tuple[float | None, float | None]:
            return mean_std([r.metrics.get(key) for r in rs])

        hit = [t for t in ([r.time_to(target, clock) for r in rs] if target else []) if t is not None]
        out.append({"family": name, "runs": len(rs), "params": stat("params")[0],
                    "params_non_embedding": stat("params_non_embedding")[0], "context": scored_context(rs[0].metrics),
                    "valid_ppl": mean_std([r.best_val_ppl() for r in rs]), "test_ppl": stat("test/ppl"),
                    "tokens_per_s": stat("tokens_per_s"), "time_to_target_s": mean_std(hit), "reached": len(hit),
                    "wall_time_s": mean_std([wall_seconds(r.metrics) for r in rs]), "peak_mem_mb": stat("peak_mem_mb")})
    return out


def table(groups: dict[str, list[Run]], target: float | None, clock: str = WALL_CLOCK) -> str:
    head = ["family", "runs", "params", "non-emb params", "context of a scored token", "valid ppl", "test ppl", "tokens/s",
            (f"train time to ppl {target:.1f}" if target else "train time to target") + (" (CPU s)" if clock == CPU_CLOCK else " (s)"),
            "wall time (s)",
            "peak mem (MB)"]
    rows = []
    for row in summary_rows(groups, target, clock):
        to_target = _fmt(*row["time_to_target_s"], digits=0) if row["reached"] else "not reached"
        if row["reached"] and row["reached"] < row["runs"]:
            to_target += f" ({row['reached']}/{row['runs']} runs)"
        params, non_emb = row["params"], row["params_non_embedding"]
        rows.append([row["family"], row["runs"], f"{params:,.0f}" if params else "–", f"{non_emb:,.0f}" if non_emb else "–",
                     row["context"], _fmt(*row["valid_ppl"]), _fmt(*row["test_ppl"]), _fmt(*row["tokens_per_s"], digits=0),
                     to_target, _fmt(*row["wall_time_s"], digits=0), _fmt(*row["peak_mem_mb"], digits=0)])
    return "\n".join(table_lines(head, rows))


def wandb_columns(rows: list[dict]) -> tuple[list[str], list[list]]:
    """The table as W&B columns of numbers (a mean and its sd side by side), so W&B sorts them."""
    columns = ["family", "runs", "params", "params_non_embedding", "context", "valid_ppl", "valid_ppl_sd", "test_ppl",
               "test_ppl_sd", "tokens_per_s", "time_to_target_s", "runs_reaching_target", "wall_time_s", "peak_mem_mb"]
    data = [[r["family"], r["runs"], r["params"], r["params_non_embedding"], r["context"], *r["valid_ppl"], *r["test_ppl"],
             r["tokens_per_s"][0], r["time_to_target_s"][0], r["reached"], r["wall_time_s"][0], r["peak_mem_mb"][0]]
            for r in rows]
    return columns, data


# -- the page -----------------------------------------------------------------------------------
def write_report(runs: list[Run], out: Path, target: float | None = None, title: str = "Comparison",
                 budgets: list[float] | None = None, time_budgets: list[float] | None = None) -> dict:
    """Write report.md, runs.csv and the PNGs into `out`; returns their paths and the table."""
    out.mkdir(parents=True, exist_ok=True)
    groups = families(runs)  # the plots: one colour per family
    rows = configurations(runs)  # the table: one row per family, or per size and budget of it
    target = target if target is not None else default_target(rows)
    clock = common_clock([(r.metrics.get("device"), r.curve) for r in runs if not r.failed])  # one for every row
    text = table(rows, target, clock)
    numbers = wandb_columns(summary_rows(rows, target, clock))
    pngs = {
        "ppl_vs_train_time": plot_curves(groups, clock, f"training time (s): {clock_name(clock)}", out / "ppl_vs_time.png"),
        "ppl_vs_tokens": plot_curves(groups, "curve/tokens", "training tokens seen", out / "ppl_vs_tokens.png"),
        "ppl_vs_params": plot_params(groups, out / "ppl_vs_params.png"),
    }
    failed = [r for r in runs if r.failed and not r.unfinished]
    unfinished = [r for r in runs if r.unfinished]
    lines = [f"# {title}", "", text, ""]
    lines += [f"![{k}]({p.name})" for k, p in pngs.items()]
    frontier = frontier_section(runs, out, budgets, time_budgets)  # runs that counted train/flops (experiment=frontier)
    if frontier:
        lines += ["", frontier["markdown"]]
        pngs.update(frontier["pngs"])
    if failed:
        lines += ["", "## Failed jobs", ""] + [f"- {r.name}: {r.metrics.get('error')}" for r in failed]
    if unfinished:
        lines += ["", "## Unfinished jobs (running, or stopped by a signal: the same command resumes them)", ""]
        lines += [f"- {r.name}: {r.metrics['status']}" for r in unfinished]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    with open(out / "runs.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["run", "family", "status", "params", "params_non_embedding", "best_val_ppl", "test_ppl",
                         "tokens_per_s", "train_time_to_target_s", "wall_time_s", "peak_mem_mb"])
        for r in runs:
            m = r.metrics
            writer.writerow([r.name, r.family, m.get("status"), m.get("params"), m.get("params_non_embedding"),
                             r.best_val_ppl(), m.get("test/ppl"), m.get("tokens_per_s"),
                             r.time_to(target, clock) if target else None, wall_seconds(m), m.get("peak_mem_mb")])
    return {"table": text, "columns": numbers[0], "rows": numbers[1], "target": target, "report": out / "report.md", "pngs": pngs, "frontier": frontier}


def log_to_wandb(result: dict, mode: str, project: str, group: str | None) -> None:
    """Post the plots and the table to W&B as media of a `report` run ('auto': only when online); the
    table is a `wandb.Table` of numbers, which W&B sorts and filters, not a picture of the markdown."""
    from seqbench.training.loggers import resolve_mode  # Lightning's loggers: loaded only for W&B

    resolved = resolve_mode(mode)
    if resolved == "disabled" or (mode == "auto" and resolved != "online"):
        print("W&B: the plots were not posted (offline here); --wandb offline writes them for a later `wandb sync`")
        return
    mode = resolved
    import wandb

    run = wandb.init(project=project, group=group, job_type="report", mode=mode,
                     dir=str(result["report"].parent))
    run.log({f"report/{k}": wandb.Image(str(p)) for k, p in result["pngs"].items()})
    run.log({"report/table": wandb.Table(columns=result["columns"], data=result["rows"])})
    run.finish()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m seqbench.reports.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="*", type=Path, help="multirun (or run) directories")
    parser.add_argument("--out", type=Path, help="where report.md and the PNGs go (default: <first dir>/report)")
    parser.add_argument("--target-ppl", type=float, help="perplexity for the time-to-target column")
    parser.add_argument("--title", default="Comparison")
    parser.add_argument("--budgets", type=lambda s: [float(b) for b in s.split(",")],
                        help="FLOPs budgets of the frontier table, e.g. 1e12,1e13 (default: the runs' budget.flops)")
    parser.add_argument("--time-budgets", type=lambda s: [float(b) for b in s.split(",")],
                        help="training seconds of the frontier's time table, e.g. 10,100,300 (default: decades)")
    parser.add_argument("--wandb-group", help="read the runs of this W&B group instead of directories")
    parser.add_argument("--wandb-project", default="seqbench")
    parser.add_argument("--wandb-entity")
    parser.add_argument("--wandb", default="auto", choices=["auto", "online", "offline", "disabled"],
                        help="post the plots to W&B (auto: only when online)")
    args = parser.parse_args(argv)
    started = time.time()
    if args.wandb_group:
        runs = read_wandb(args.wandb_group, args.wandb_project, args.wandb_entity)
        out = args.out or Path("outputs") / "reports" / args.wandb_group
    elif args.dirs:
        runs = read_runs(args.dirs)
        out = args.out or args.dirs[0] / "report"
    else:
        parser.error("give multirun directories or --wandb-group")
    result = write_report(runs, out, args.target_ppl, args.title, args.budgets, args.time_budgets)
    write_record(out, ["report.md", "runs.csv"], command_line("seqbench.reports.report", argv), started)  # the ledger
    print(result["table"])
    if result["frontier"]:
        print("\n" + result["frontier"]["verdict_table"] + "\n\n" + result["frontier"]["table"])
    print(f"\nwrote {result['report']} and {', '.join(p.name for p in result['pngs'].values())}")
    if args.wandb != "disabled":
        log_to_wandb(result, args.wandb, args.wandb_project, args.wandb_group or (args.dirs[0].name if args.dirs else None))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
