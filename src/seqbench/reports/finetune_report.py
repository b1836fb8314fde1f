"""Pre-trained against from scratch, over seeds: the table of experiment=pretraining.

    python src/train.py -m experiment=pretraining pretrained.bert=<ckpt> pretrained.gpt=<ckpt> seed=1,2,3
    python -m seqbench.reports.finetune_report outputs/multiruns/<time> [more dirs] [--metric test/acc]
        [--grid model.optimizer.lr [--select val/acc_best]]

Reads every job (`seqbench.training.record.read_runs`: the record and the preset) and writes one
row per preset: the score of each seed, their mean and standard deviation, params and wall time; then
one row per family that has both `<family>_pretrained` and `<family>` (or `<family>_reinit`, the same
network and tokenizer from random weights): the gain of pre-training, paired
by seed (the same seed gives both runs the same data order and head initialisation), as the mean
difference, its standard deviation and how many seeds it won. A failed job is listed, never averaged.

With `--grid KEY` the sweep also ran each preset at several values of one override (the fine-tuning
learning rate, say). A recipe tuned for one preset is unfair to the others: a rate that suits random
weights may wash out pre-trained ones. So each preset gets its own value, the one with the best mean
validation score over its seeds (`--select`, by default the tested checkpoint's `val/acc_best`), and
only those runs enter the table. Test scores never choose anything; the selection table shows them
for every value so a reader can see what the choice cost or bought.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

from seqbench.tables import table_lines
from seqbench.training.clocks import wall_seconds
from seqbench.training.record import Run, read_runs


def value_of(run: Run, key: str) -> str:
    """The value `key` was given on the command line (`default` when it was not overridden)."""
    match = re.search(rf"(?:^|\s)\+{{0,2}}{re.escape(key)}=(\S+)", str(run.metrics.get("overrides", "")))
    return match.group(1) if match else "default"


def select(runs: list[Run], grid: str, by: str, metric: str) -> tuple[list[Run], list[str]]:
    """Per preset, the runs at the `grid` value with the best mean validation score `by`; and the table of
    every value's mean validation and test score, the chosen one in bold."""
    cells: dict[str, dict[str, list[Run]]] = {}
    unscored = []
    for run in runs:
        if not run.failed and run.metrics.get(by) is not None:
            cells.setdefault(run.family, {}).setdefault(value_of(run, grid), []).append(run)
        elif not run.failed:
            unscored.append(run.name)
    kept = [r for r in runs if r.failed]
    rows = []
    for preset in sorted(cells):
        means = {v: statistics.fmean(r.metrics[by] for r in rs) for v, rs in cells[preset].items()}
        best = max(means, key=means.get)
        kept += cells[preset][best]
        for value in sorted(means, key=_as_number):
            rs = cells[preset][value]
            tests = [r.metrics[metric] * 100 for r in rs if r.metrics.get(metric) is not None]
            mark = "**" if value == best else ""
            rows.append([preset, f"{mark}{value}{mark}", len(rs), f"{mark}{means[value] * 100:.2f}{mark}", _stats(tests)])
    lines = table_lines(["preset", grid, "seeds", f"mean {by} (chooses)", f"mean {metric}"], rows)
    if unscored:
        lines += ["", f"Left out, no {by} to choose by: " + ", ".join(unscored)]
    return kept, lines


def _as_number(value: str) -> tuple[int, float | str]:
    try:
        return 0, float(value)
    except ValueError:
        return 1, value


def _stats(values: list[float]) -> str:
    if not values:
        return "–"
    mean = statistics.fmean(values)
    return f"{mean:.2f} ± {statistics.stdev(values):.2f}" if len(values) > 1 else f"{mean:.2f}"


def collect(runs: list[Run], metric: str) -> dict[str, dict[int | None, Run]]:
    """preset -> seed -> run (the completed runs); failures are reported by `table`."""
    out: dict[str, dict[int | None, Run]] = {}
    for run in runs:
        if not run.failed and run.metrics.get(metric) is not None:
            out.setdefault(run.family, {})[run.seed] = run
    return out


def table(runs: list[Run], metric: str = "test/acc", scale: float = 100.0) -> str:
    groups = collect(runs, metric)
    rows = []
    for preset in sorted(groups):
        by_seed = groups[preset]
        seeds = sorted(by_seed, key=lambda s: (s is None, s))
        scores = [by_seed[s].metrics[metric] * scale for s in seeds]
        walls = [wall_seconds(by_seed[s].metrics) for s in seeds]  # a resumed run's too
        walls = [w for w in walls if w is not None]
        params = by_seed[seeds[0]].metrics.get("params")
        wall = f"{statistics.fmean(walls) / 60:.1f}" if walls else "–"
        rows.append([preset, ", ".join(map(str, seeds)), ", ".join(f"{v:.2f}" for v in scores), _stats(scores),
                     f"{params:,}" if params else "–", wall])
    lines = table_lines(["preset", "seeds", f"{metric} per seed", "mean ± std", "params", "mean wall time (min)"], rows)
    gains = []
    for preset in sorted(groups):
        if not preset.endswith("_pretrained"):
            continue
        family = preset.removesuffix("_pretrained")
        for baseline in (family, family + "_reinit"):  # scratch, and the same network from random weights
            base = groups.get(baseline)
            if base is None:
                continue
            paired = sorted(set(groups[preset]) & set(base), key=lambda s: (s is None, s))
            diffs = [(groups[preset][s].metrics[metric] - base[s].metrics[metric]) * scale for s in paired]
            if diffs:
                won = sum(d > 0 for d in diffs)
                gains.append([f"{preset} − {baseline}", ", ".join(map(str, paired)), ", ".join(f"{d:+.2f}" for d in diffs),
                              _stats(diffs), f"won {won} of {len(diffs)}"])
    if gains:
        lines += ["", *table_lines(["pre-training gain (paired by seed)", "seeds", "difference per seed", "mean ± std", None],
                                   gains)]
    failed = [r for r in runs if r.failed]
    if failed:
        lines += ["", "Failed jobs (not averaged): " + "; ".join(f"{r.name} ({r.metrics.get('error') or 'failed'})"
                                                               for r in failed)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="multirun (or single-run) directories")
    parser.add_argument("--metric", default="test/acc", help="the score (test/acc for SST-2, test/f1 for CoNLL)")
    parser.add_argument("--out", type=Path, help="also write the table to this .md file")
    parser.add_argument("--grid", help="an override swept per preset (model.optimizer.lr): each preset keeps "
                                       "the value with the best mean validation score")
    parser.add_argument("--select", default="val/acc_best", help="the validation score that chooses --grid's value")
    args = parser.parse_args(argv)
    runs = read_runs(args.dirs)
    chosen: list[str] = []
    if args.grid:
        runs, chosen = select(runs, args.grid, args.select, args.metric)
    text = table(runs, args.metric)
    if chosen:
        text = "\n".join([*chosen, "", text])
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return text


if __name__ == "__main__":
    sys.exit(main() and 0)
