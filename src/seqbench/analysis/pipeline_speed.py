"""Does Lightning + Hydra + logging cost training speed? Measured against two bare loops, same run.

    python -m seqbench.analysis.pipeline_speed --reference <pytorch/examples>/word_language_model

Three ways of training the same 2x200 LSTM on PTB (batch 20, bptt 35, no dropout, untied, SGD with
clipping), timed one after another on the same machine so their ratio is meaningful:

* `reference` — pytorch/examples' word_language_model `main.py`, run as its authors wrote it (only
  when `--reference` points at a checkout); its own `ms/batch` lines are parsed, the first one
  (warm-up) dropped.
* `bare` — a plain PyTorch loop over seqbench's network and batches: the floor for our model code.
* `seqbench` — `src/train.py` as a user runs it (Rich progress bar, CSV logging, checkpoint and LR
  callbacks), timed by `RunStats` from one batch's end to the next.

Writes a CSV and prints a markdown table; `experiments/ptb-recurrent.md` records the results.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from seqbench.data.ptb import PTBDataModule
from seqbench.nn.recurrent_lm import RecurrentLM, detach_state
from seqbench.tables import table
from seqbench.training.record import read_metrics

ROOT = Path(__file__).resolve().parents[3]
TOKENS_PER_BATCH = 20 * 35


def bare_loop(data_dir: str, batches: int, warmup: int = 5) -> float:
    """ms/batch of a plain loop over the same network and batches as `model=lstm data=ptb`."""
    torch.manual_seed(0)
    dm = PTBDataModule(data_dir, batch_size=20, bptt=35)
    dm.setup()
    net = RecurrentLM(len(dm.vocab), "lstm", 200, 200, 2, dropout=0.0, tie_weights=False, init_range=None)
    opt = torch.optim.SGD(net.parameters(), lr=20.0)
    state, start = None, None
    for i, batch in enumerate(dm._stream_loader("train", 20)):
        if i == warmup:
            start = time.perf_counter()
        if i == warmup + batches:
            break
        logits, state = net(batch["input"], state)
        state = detach_state(state)
        loss = F.cross_entropy(logits.flatten(0, 1), batch["target"].flatten(), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 0.25)
        opt.step()
        loss.item()  # the reference and the progress bar both read the loss every step
    return 1000 * (time.perf_counter() - start) / batches


def seqbench_cli(batches: int, workdir: Path) -> float:
    run_dir = workdir / f"seqbench-{time.time_ns()}"
    cmd = [sys.executable, str(ROOT / "src" / "train.py"), "model=lstm", "data=ptb", "model.tie_weights=false",
           "model.dropout=0", f"trainer.max_steps={batches + 5}", "trainer.limit_val_batches=0", "test=false",
           "logger=csv", "callbacks.run_stats.warmup_steps=5", f"hydra.run.dir={run_dir}"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return read_metrics(run_dir)["train/ms_per_batch"]


def reference_cli(reference: Path, data_dir: str, batches: int, workdir: Path) -> float:
    """Run word_language_model's main.py on PTB (its data layout: train/valid/test.txt)."""
    corpus = workdir / "ptb-as-wlm"
    corpus.mkdir(exist_ok=True)
    for split in ("train", "valid", "test"):
        link = corpus / f"{split}.txt"
        if not link.exists():
            link.symlink_to(Path(data_dir) / "ptb" / f"ptb.{split}.txt")
    interval = 100
    cmd = [sys.executable, "-u", "main.py", "--data", str(corpus), "--epochs", "1", "--dropout", "0",
           "--log-interval", str(interval), "--save", str(workdir / "wlm.pt")]
    proc = subprocess.Popen(cmd, cwd=reference, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    times = []
    for line in proc.stdout:  # "| epoch 1 | 200/1327 batches | lr 20.00 | ms/batch 112.3 | ..."
        match = re.search(r"ms/batch\s+([\d.]+)", line)
        if match:
            times.append(float(match.group(1)))
            if len(times) * interval >= batches + interval:
                break
    proc.kill()
    proc.wait()
    if len(times) < 2:
        raise RuntimeError("the reference printed no timing lines; is --reference a word_language_model checkout?")
    return sum(times[1:]) / len(times[1:])  # the first interval holds start-up costs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--reference", type=Path, help="path to pytorch/examples/word_language_model")
    parser.add_argument("--data-dir", default=os.environ.get("SEQBENCH_DATA_DIR", str(ROOT / "data")))
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench" / "pipeline_speed.csv")
    args = parser.parse_args(argv)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for repeat in range(args.repeats):  # interleaved, so drift in machine load hits all alike
            runs = {"bare": lambda: bare_loop(args.data_dir, args.batches),
                    "seqbench": lambda: seqbench_cli(args.batches, work)}
            if args.reference:
                runs["reference"] = lambda: reference_cli(args.reference, args.data_dir, args.batches, work)
            for name, fn in runs.items():
                ms = fn()
                rows.append({"impl": name, "repeat": repeat, "ms_per_batch": round(ms, 2),
                             "tokens_per_s": round(TOKENS_PER_BATCH / ms * 1000, 1)})
                print(rows[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    best = {}
    for row in rows:
        best[row["impl"]] = min(best.get(row["impl"], float("inf")), row["ms_per_batch"])
    base = best.get("reference", best["bare"])
    print(f"\n{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {args.batches} batches x {args.repeats} repeats (best shown)\n")
    print(table(["implementation", "ms/batch", "tokens/s", "time vs reference"],
                ([name, f"{ms:.1f}", f"{TOKENS_PER_BATCH / ms * 1000:,.0f}", f"{ms / base:.2f}x"] for name, ms in best.items()),
                align="lrrr"))


if __name__ == "__main__":
    main()
