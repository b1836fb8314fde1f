"""What an evaluation slice costs and how far its score moves: `python -m seqbench.analysis.eval_slices`.

    python -m seqbench.analysis.eval_slices <run dirs> --bytes 131072,1048576 --out experiments/figures/enwik8-eval-slices

A corpus whose data module scores a slice of a split (enwik8: `data.eval_bytes_valid`, `eval_bytes_test`:
the first N bytes) trades the evaluation's cost against noise. For each run's checkpoint this scores every
disjoint slice of N bytes of the split (slice k = bytes [kN, (k+1)N); `--within M`: of its first M bytes
only), each alone, as a run scores its
slice: the data module's own loader (the recurrent families' columns start cold, the attention families'
first window has no context) and the model's validation step. It records each slice's bits per byte and
the CPU seconds it took (one thread). The summary gives, per family and N, the mean and sd of the bpc
over the slices and the CPU seconds a slice costs; and per N the sd over slices of the paired difference
between two models (both read the same bytes, as two runs compared on one slice do), over every pair.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import statistics
import sys
import time
from pathlib import Path

import lightning as L
import torch

from seqbench.analysis.context_usage import load_all
from seqbench.provenance import command_line, write_record

SPLITS = ("valid", "test")


def full_split(datamodule, split: str) -> torch.Tensor:
    """The whole split, whatever slice the run evaluated (`split_stream` where the data module slices)."""
    whole = getattr(datamodule, "split_stream", None)
    return whole(split) if callable(whole) else datamodule.streams[split]


def score_slices(lm, stream: torch.Tensor, lengths: list[int], split: str, trainer) -> list[dict]:
    """One row per disjoint slice of `stream` of each length: its bpc and the CPU seconds its evaluation took."""
    rows = []
    for n in lengths:
        for k in range(stream.numel() // n):
            lm.datamodule.streams["valid"] = stream[k * n : (k + 1) * n]  # what validate() reads, whatever the split
            started = time.process_time()
            (result,) = trainer.validate(lm.model, datamodule=lm.datamodule, verbose=False)
            rows.append({"run": lm.name, "family": lm.family, "split": split, "slice_bytes": n, "slice": k,
                         "bpc": float(result["val/loss"]) / math.log(2), "cpu_s": time.process_time() - started})
    return rows


def summary(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(per family and length: slices, mean and sd of bpc, CPU s a slice; per length: the paired differences'
    sd over slices, its median and largest over the pairs of families)."""
    by: dict[tuple[str, int], dict[int, dict]] = {}
    for r in rows:
        by.setdefault((r["family"], r["slice_bytes"]), {})[r["slice"]] = r
    spread = []
    for (family, n), slices in by.items():
        bpc = [s["bpc"] for s in slices.values()]
        spread.append({"family": family, "slice_bytes": n, "slices": len(bpc), "mean_bpc": statistics.fmean(bpc),
                       "sd_bpc": statistics.stdev(bpc) if len(bpc) > 1 else None,
                       "cpu_s_per_slice": statistics.fmean(s["cpu_s"] for s in slices.values())})
    paired = []
    for n in sorted({n for _, n in by}):
        families = sorted(f for f, m in by if m == n)
        sds = []
        for a, b in itertools.combinations(families, 2):
            common = sorted(set(by[(a, n)]) & set(by[(b, n)]))
            if len(common) > 1:
                sds.append(statistics.stdev(by[(a, n)][k]["bpc"] - by[(b, n)][k]["bpc"] for k in common))
        if sds:
            paired.append({"slice_bytes": n, "pairs": len(sds), "median_sd_difference": statistics.median(sds),
                           "max_sd_difference": max(sds)})
    return spread, paired


def markdown(spread: list[dict], paired: list[dict]) -> str:
    def num(v, fmt):
        return "–" if v is None else format(v, fmt)

    lines = ["| family | slice bytes | slices | mean bpc | sd bpc | CPU s a slice |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['family']} | {r['slice_bytes']:,} | {r['slices']} | {r['mean_bpc']:.4f} | {num(r['sd_bpc'], '.4f')} "
              f"| {r['cpu_s_per_slice']:.1f} |" for r in spread]
    lines += ["", "| slice bytes | pairs of families | median sd of a paired difference | largest |", "|---:|---:|---:|---:|"]
    lines += [f"| {r['slice_bytes']:,} | {r['pairs']} | {r['median_sd_difference']:.4f} | {r['max_sd_difference']:.4f} |"
              for r in paired]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m seqbench.analysis.eval_slices", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories (their best checkpoint) or .ckpt files")
    parser.add_argument("--bytes", default="131072,1048576", help="slice lengths, comma-separated")
    parser.add_argument("--split", choices=SPLITS, default="valid")
    parser.add_argument("--within", type=int, help="cut only the split's first this many bytes into slices "
                        "(default: the whole split)")
    parser.add_argument("--out", type=Path, help="write slices.csv and summary.md there, with record.json")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    started = time.time()
    torch.set_num_threads(1)  # the CPU seconds of one thread, as a sweep's job spends them
    trainer = L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    lengths = [int(n) for n in args.bytes.split(",")]
    rows = []
    for lm in load_all(args.runs):
        rows += score_slices(lm, full_split(lm.datamodule, args.split)[: args.within], lengths, args.split, trainer)
    text = markdown(*summary(rows))
    if args.out is None:
        print(text)
        return text
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "slices.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (args.out / "summary.md").write_text(text + "\n")
    write_record(args.out, ["slices.csv", "summary.md"], command_line("seqbench.analysis.eval_slices", argv), started)
    return text


if __name__ == "__main__":
    main()
