"""Pre-trained against from scratch, over seeds: the table of experiment=pretraining.

    python src/train.py -m experiment=pretraining pretrained.bert=<ckpt> pretrained.gpt=<ckpt> seed=1,2,3
    python -m seqbench.analysis.finetune_report outputs/multiruns/<time> [more dirs] [--metric test/acc]

Reads every job (`seqbench.report.read_local`: metrics.json and the `family=` preset) and writes one
row per preset: the score of each seed, their mean and standard deviation, params and wall time; then
one row per family that has both `<family>_pretrained` and `<family>` (or `<family>_reinit`, the same
network and tokenizer from random weights): the gain of pre-training, paired
by seed (the same seed gives both runs the same data order and head initialisation), as the mean
difference, its standard deviation and how many seeds it won. A failed job is listed, never averaged.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

from seqbench.report import Run, read_local


def seed_of(run: Run) -> int | None:
    match = re.search(r"(?:^|\s)seed=(\d+)", str(run.metrics.get("overrides", "")))
    return int(match.group(1)) if match else None


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
            out.setdefault(run.family, {})[seed_of(run)] = run
    return out


def table(runs: list[Run], metric: str = "test/acc", scale: float = 100.0) -> str:
    groups = collect(runs, metric)
    lines = [f"| preset | seeds | {metric} per seed | mean ± std | params | mean wall time (min) |",
             "|---|---|---|---|---|---|"]
    for preset in sorted(groups):
        by_seed = groups[preset]
        seeds = sorted(by_seed, key=lambda s: (s is None, s))
        scores = [by_seed[s].metrics[metric] * scale for s in seeds]
        walls = [by_seed[s].metrics.get("wall_time_s") for s in seeds]
        walls = [w for w in walls if w is not None]
        params = by_seed[seeds[0]].metrics.get("params")
        wall = f"{statistics.fmean(walls) / 60:.1f}" if walls else "–"
        lines.append(f"| {preset} | {', '.join(map(str, seeds))} | {', '.join(f'{v:.2f}' for v in scores)} | "
                     f"{_stats(scores)} | {f'{params:,}' if params else '–'} | {wall} |")
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
                gains.append(f"| {preset} − {baseline} | {', '.join(map(str, paired))} | "
                             f"{', '.join(f'{d:+.2f}' for d in diffs)} | {_stats(diffs)} | won {won} of {len(diffs)} |")
    if gains:
        lines += ["", "| pre-training gain (paired by seed) | seeds | difference per seed | mean ± std | |",
                  "|---|---|---|---|---|", *gains]
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
    args = parser.parse_args(argv)
    text = table(read_local(args.dirs), args.metric)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return text


if __name__ == "__main__":
    sys.exit(main() and 0)
