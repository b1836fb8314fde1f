"""What `seqbench.analysis.bench` writes: one line per case as it is measured, `bench.csv` (the rows),
`bench.json` (the rows with the machine and command that made them) and `bench.png` (step time,
tokens/s and peak memory against T). Kept apart from the measurement, which is what a reader of
`seqbench.analysis.bench` has come to check.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import torch

from seqbench.analysis.layer_bench import machine

# the columns of bench.csv, in order; a row may carry more keys (bench.json keeps them all)
FIELDS = ["device", "family", "batch", "length", "status", "step_ms", "tokens_per_s", "peak_mem_mb",
          "params_non_embedding", "flops_per_token", "tflops", "mfu", "peak_tflops", "peak_source", "load_1min",
          "attention_kernel"]


def print_row(row: dict) -> None:
    if row["status"] != "ok":
        print(f"{row['family']:22s} B={row['batch']:<3d} T={row['length']:<5d} {row['status']}", flush=True)
        return
    print(f"{row['family']:22s} B={row['batch']:<3d} T={row['length']:<5d} {row['step_ms']:9.1f} ms "
          f"{row['tokens_per_s']:10.0f} tok/s {row['peak_mem_mb']:8.1f} MB  MFU {100 * row['mfu']:.1f}%"
          f"  {row.get('attention_kernel') or ''}", flush=True)


def write_csv(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def write_json(rows: list[dict], path: Path, device: torch.device, command: str | None, clock: str,
                 vocab: int) -> None:
    """The rows with where and how they were measured (CPU model, torch, date, command, clock)."""
    record = {**machine(device), "command": command, "threads": torch.get_num_threads(), "clock": clock,
              "vocab": vocab, "results": rows}
    path.write_text(json.dumps(record, indent=1) + "\n")


def plot(rows: list[dict], path: Path) -> Path:
    """Step time, tokens/s and peak memory against T (log-log); one colour per family, one line style
    per batch size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r["status"] == "ok"]
    families = list(dict.fromkeys(r["family"] for r in ok))
    batches = sorted({r["batch"] for r in ok})
    styles = ["-", "--", ":", "-."]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), dpi=90)
    panels = [("step_ms", "forward + backward step (ms)"), ("tokens_per_s", "tokens / s"),
              ("peak_mem_mb", "peak memory of a step (MB)")]
    for ax, (key, label) in zip(axes, panels):
        for i, family in enumerate(families):
            for j, batch in enumerate(batches):
                pts = sorted((r["length"], r[key]) for r in ok if r["family"] == family and r["batch"] == batch)
                if pts:
                    xs, ys = zip(*pts)
                    ax.plot(xs, [max(y, 1e-3) for y in ys], styles[j % len(styles)], color=f"C{i}", marker="o",
                            markersize=3, label=f"{family} B={batch}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{rows[0]['device'] if rows else ''}: training step at ~matched parameters")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
