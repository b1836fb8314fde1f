"""Training-step time, tokens/s, memory and MFU against sequence length, every family at matched size.

    python -m seqbench.analysis.bench                                      # CPU, the PTB presets, T = 64 .. 4096
    python -m seqbench.analysis.bench --device cuda --batch-sizes 8,32      # GPU: bf16 autocast, MFU vs the card's stated peak
    python -m seqbench.analysis.bench --families ptb/lstm,ptb/gpt --lengths 64,128 --out outputs/bench/quick

The models are the ones the comparison trains: each family is composed from its preset
(`conf/preset/<preset>.yaml`, ~0.6M parameters without embeddings for `ptb/*`) exactly as
`python src/train.py preset=<preset>` would build it, with the attention models' `context` set to
the sequence length. A family may carry variants after colons: `ptb/gpt:reference` is GPT with the
written-out attention instead of SDPA, the "no flash" case whose memory grows as T²; `key=value` sets
`model.key` (`ptb/gpt:dropout=0`), or adds it (`ptb/ssm:layer=ssd:d_state=64:headdim=56` is Mamba-2's SSD
on the SSM's preset: the same width and depth, 594,934 parameters without embeddings against 596,992). Dropout matters beyond regularisation here: PyTorch's CPU flash
kernel refuses attention dropout, so the presets (dropout 0.1) run SDPA's unfused math path on a CPU,
and only the `dropout=0` variants show what the fused kernel does. Every row records the attention
kernel that ran (`attention_kernel`, read from the profiler: flash, efficient, cudnn, math, or
written-out; empty for the recurrent families).

One measured step is the forward pass of `lm_logits` on a (B, T) batch, the loss of `tasks.lm`
and the backward pass (no optimizer update). Reported per (family, B, T): the median step time
over `--repeats` steps after `--warmup`, tokens/s = B·T / step time, the peak memory the step adds
on top of the built model (CUDA: `max_memory_allocated`; CPU: the kernel's RSS high-water mark,
with each case in a fresh process so one case's allocations cannot hide another's), and the model
FLOPs utilisation: training FLOPs per token (the matmuls, forward + backward = 3 x forward, with
attention's 12·L·d·T for scores and values, PaLM appendix B: `seqbench.nn.flops`, the count runs log
as `train/flops`) x tokens/s over the device's peak. The attention term counts the full T x T score
matrix even for causal attention, whose mask makes half of it unneeded, and it does so on every device
and for every kernel — a causal flash kernel that skips the masked blocks does about half that work,
so its MFU reads up to 2x the work done in the attention term; one convention keeps rows comparable —
the card's stated bf16 dense peak (Lightning's `get_available_flops` table: H100, H200, A100, L4, ...),
else the measured throughput of a large matmul in the dtype the step runs in (fp32 on CPU). A case is skipped, and says why, once a shorter length of the same
family and batch was slower than `--max-step-s` or when its memory, extrapolated from the family's own
measured growth (`predicted_mem_gb`), would pass `--max-mem-gb`.

`--clock cpu` times a step by the process's CPU time (user + system) instead of the wall clock: on a
CPU shared with other jobs their load stretches wall time but not the CPU time of a one-thread step
(`--threads 1`; with more threads CPU time adds the threads up). With `--out` the rows are written as
`bench.csv`, `bench.png` and `bench.json`, the last with the machine (CPU model, torch, date) and the
command that made them (`seqbench.analysis.layer_bench.machine`), for a page to render.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import shlex
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

import torch

from seqbench.analysis.bench_output import plot, print_row, write_csv, write_json
from seqbench.callbacks.run_stats import reset_peak_memory
from seqbench.compose import compose_final
from seqbench.data.spec import TaskSpec
from seqbench.entry import register_resolvers
from seqbench.families import presets
from seqbench.provenance import command_line, write_record
from seqbench.tasks.lm import token_nll

# after the compared families' PTB presets: GPT with written-out attention (memory ~T²) and the
# attention models without dropout (the only case PyTorch's CPU flash kernel accepts)
ATTENTION_VARIANTS = ("ptb/gpt:reference", "ptb/transformer:dropout=0", "ptb/gpt:dropout=0")
# the aten ops of F.scaled_dot_product_attention's backends, as the profiler names them
SDPA_KERNELS = {"_scaled_dot_product_flash_attention": "flash", "_scaled_dot_product_efficient_attention": "efficient",
                "_scaled_dot_product_cudnn_attention": "cudnn", "_scaled_dot_product_attention_math": "math"}


# -- the models -----------------------------------------------------------------------------------
def default_families() -> list[str]:
    """The compared families' PTB presets (seqbench.families), then the attention variants."""
    return [*presets("ptb").split(","), *ATTENTION_VARIANTS]


def preset_config(family: str):
    """The config `python src/train.py preset=<preset>` runs with (seqbench.compose: recipe included),
    with a variant's overrides (`ptb/gpt:reference`, `ptb/gpt:dropout=0`) after it."""
    preset, *variants = family.split(":")
    overrides = [f"preset={preset}", "logger=csv"]
    for variant in variants:
        # `++`: a key the preset's model config lacks is added (SSD's `headdim` on the SSM's preset)
        overrides.append("model.attn_impl=reference" if variant == "reference" else f"++model.{variant}")
    register_resolvers()
    return compose_final(overrides)


def build_model(family: str, vocab: int, length: int):
    """The LightningModule of a family preset (`ptb/gpt`, `ptb/gpt:reference`, `ptb/gpt:dropout=0`) for
    sequences of `length`."""
    from hydra.utils import instantiate


    cfg = preset_config(family)
    if "context" in cfg.model:
        cfg.model.context = length
    return instantiate(cfg.model, spec=TaskSpec("lm", vocab_size=vocab))


def attention_kernel(step) -> str:
    """Which kernel computed attention in one call of `step`: an SDPA backend, `written-out` for a model
    that computes softmax(QKᵀ/√d)V itself, '' when nothing attended (recurrent families)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:  # aten ops are dispatched on the host
        step()
    names = {e.name.removeprefix("aten::") for e in prof.events()}
    found = sorted({kernel for op, kernel in SDPA_KERNELS.items() for name in names if name.startswith(op)})
    if found:
        return "+".join(found)
    return "written-out" if "softmax" in names or "_softmax" in names else ""


# -- memory -----------------------------------------------------------------------------------------
def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(field)).split()[1])


def memory_mark(device: torch.device) -> float:
    """Start a new peak and return the current usage in MB."""
    reset_peak_memory(device)
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device) / 2**20
    return _rss_kb("VmRSS:") / 2**10


def memory_peak(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return _rss_kb("VmHWM:") / 2**10


# -- one case ---------------------------------------------------------------------------------------
def measure(family: str, batch: int, length: int, vocab: int, device: str, warmup: int, repeats: int,
            threads: int | None = None, clock: str = "wall") -> dict:
    """Time and measure one (family, B, T) case; runs in a fresh process when isolated."""
    if threads:
        torch.set_num_threads(threads)
    dev = torch.device(device)
    torch.manual_seed(0)
    model = build_model(family, vocab, length).to(dev).train()
    tokens = torch.randint(vocab, (batch, length + 1), device=dev)
    step_batch = {"input": tokens[:, :-1], "target": tokens[:, 1:], "window": 0}

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def step() -> None:
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = model.lm_logits(step_batch, "train")  # (B, T, V)
        nll, n = token_nll(logits, step_batch["target"])  # float32 loss, as in training
        (nll / n).backward()
        model.zero_grad(set_to_none=True)

    sync()
    base = memory_mark(dev)
    step()  # the first step allocates everything a step needs: its peak is the step's memory
    sync()
    peak = memory_peak(dev) - base
    for _ in range(max(0, warmup - 1)):
        step()
    times = []
    read = time.process_time if clock == "cpu" else time.perf_counter
    for _ in range(repeats):
        sync()
        t0 = read()
        step()
        sync()
        times.append(read() - t0)
    step_s = statistics.median(times)
    kernel = attention_kernel(step) if getattr(model, "lm_batching", None) == "windows" else ""
    fpt = model.flops_per_token(length)  # the formulas of seqbench.nn.flops, as runs log them
    # a shared machine's other work slows every kernel (and stalls OpenMP barriers): record it
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"status": "ok", "step_ms": 1000 * step_s, "tokens_per_s": batch * length / step_s, "load_1min": load,
            "peak_mem_mb": peak, "params_non_embedding": model.num_params(non_embedding=True),
            "flops_per_token": fpt, "tflops": fpt * batch * length / step_s / 1e12, "attention_kernel": kernel}


def device_peak_tflops(device: torch.device) -> tuple[float, str]:
    """The card's stated bf16 dense peak from Lightning's table of GPUs, else a measured large-matmul
    throughput (a card the table lacks, or the CPU)."""
    if device.type == "cuda":
        from lightning.fabric.utilities.throughput import get_available_flops

        name = torch.cuda.get_device_name(device)
        stated = get_available_flops(device, torch.bfloat16)  # the dtype of the benchmark's autocast
        if stated:
            return stated / 1e12, f"stated bf16 dense peak of the {name}"
        dtype, n = torch.bfloat16, 8192
    else:
        dtype, n = torch.float32, 2048
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    best = math.inf
    for _ in range(5):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e12, f"measured {str(dtype).split('.')[-1]} {n}x{n} matmul ({torch.get_num_threads()} threads)"


# -- the sweep --------------------------------------------------------------------------------------
def predicted_mem_gb(measured: list[dict], length: int) -> float:
    """A step's memory at `length`, extrapolated from the family's own growth between its last two
    measured lengths: m ∝ T^p with p fitted there and held within [1, 2] — no family's step memory grows
    slower than its (B, T, V) logits or faster than attention's T² maps, and at short T a fixed part
    makes the local exponent read low. With one measured length, p = 2 (nothing measured yet)."""
    last = measured[-1]
    p = 2.0
    if len(measured) >= 2:
        before = measured[-2]
        ratio = last["peak_mem_mb"] / max(before["peak_mem_mb"], 1e-9)
        p = math.log(max(ratio, 1e-9)) / math.log(last["length"] / before["length"])
        p = min(max(p, 1.0), 2.0)
    return last["peak_mem_mb"] * (length / last["length"]) ** p / 1024


def _skip_reason(measured: list[dict], length: int, max_step_s: float, max_mem_gb: float) -> str | None:
    """Why `length` is not measured, given the shorter lengths measured for this family and batch."""
    if not measured:
        return None
    prev = measured[-1]
    if prev["status"] != "ok":
        return f"skipped: a shorter length was {prev['status'].split(':')[0]}"
    if prev["step_ms"] / 1000 > max_step_s:
        return f"skipped: T={prev['length']} already took {prev['step_ms'] / 1000:.1f} s > --max-step-s"
    predicted = predicted_mem_gb(measured, length)
    if predicted > max_mem_gb:
        return (f"skipped: memory extrapolated from T={prev['length']} at the measured growth is "
                f"{predicted:.1f} GB > --max-mem-gb")
    return None


def run(families: list[str], lengths: list[int], batch_sizes: list[int], vocab: int = 10_000, device: str = "cpu",
        warmup: int = 1, repeats: int = 3, max_step_s: float = 20.0, max_mem_gb: float = 8.0,
        isolate: bool = True, threads: int | None = None, out: Path | None = None,
        peak_tflops: float | None = None, clock: str = "wall", command: str | None = None) -> list[dict]:
    dev = torch.device(device)
    if threads:
        torch.set_num_threads(threads)
    if peak_tflops:
        peak_source = "stated with --peak-tflops"
    else:
        peak_tflops, peak_source = device_peak_tflops(dev)
    device_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"device: {device_name}; peak {peak_tflops:.2f} TFLOP/s ({peak_source})", flush=True)
    rows: list[dict] = []
    pool = mp.get_context("spawn").Pool(1, maxtasksperchild=1) if isolate else None
    try:
        for family in families:
            for batch in batch_sizes:
                measured: list[dict] = []
                for length in sorted(lengths):
                    row = {"device": device_name, "family": family, "batch": batch, "length": length,
                           "peak_tflops": peak_tflops, "peak_source": peak_source}
                    reason = _skip_reason(measured, length, max_step_s, max_mem_gb)
                    if reason:
                        row["status"] = reason
                    else:
                        args = (family, batch, length, vocab, device, warmup, repeats, threads, clock)
                        try:
                            row.update(pool.apply(measure, args) if pool else measure(*args))
                        except torch.cuda.OutOfMemoryError:
                            row["status"] = "out of memory"
                        row["mfu"] = row["tflops"] / peak_tflops if row["status"] == "ok" else None
                        measured.append(row)
                    rows.append(row)
                    print_row(row)
    finally:
        if pool:
            pool.close()
    if out is not None:
        write_csv(rows, out / "bench.csv")
        plot(rows, out / "bench.png")
        write_json(rows, out / "bench.json", dev, command, clock, vocab)
        print(f"wrote {out / 'bench.csv'}, {out / 'bench.png'} and {out / 'bench.json'}")
    return rows


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> list[dict]:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m seqbench.analysis.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when available)")
    parser.add_argument("--families", default=",".join(default_families()),
                        help="family presets (conf/preset/...); ':reference' uses the written-out attention, "
                             "':key=value' sets model.key (':dropout=0')")
    parser.add_argument("--lengths", default="64,128,256,512,1024,2048,4096")
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--vocab", type=int, default=10_000, help="vocabulary size (PTB: 10,000)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-step-s", type=float, default=20.0)
    parser.add_argument("--max-mem-gb", type=float, default=8.0)
    parser.add_argument("--threads", type=int, help="CPU threads (default: torch's)")
    parser.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                        help="step time from the wall clock, or from the process's CPU time (a shared CPU)")
    parser.add_argument("--peak-tflops", type=float, help="the device's peak for MFU (default: stated for a "
                                                          "GPU Lightning knows, else measured)")
    parser.add_argument("--no-isolate", action="store_true",
                        help="measure every case in this process (CPU peak memory is then unreliable)")
    parser.add_argument("--out", type=Path, help="output folder (default outputs/bench/<device>-<time>)")
    args = parser.parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    if args.clock == "cpu" and device != "cpu":
        parser.error("--clock cpu measures CPU work; GPU kernels run outside it")
    out = args.out or Path("outputs") / "bench" / f"{device}-{datetime.now():%Y-%m-%d_%H-%M-%S}"
    isolate = device == "cpu" and not args.no_isolate
    started = time.time()
    rows = run(args.families.split(","), _ints(args.lengths), _ints(args.batch_sizes), args.vocab, device,
               args.warmup, args.repeats, args.max_step_s, args.max_mem_gb, isolate, args.threads, out,
               args.peak_tflops, args.clock, "python -m seqbench.analysis.bench " + shlex.join(argv))
    write_record(out, ["bench.csv", "bench.json"], command_line("seqbench.analysis.bench", argv), started)  # the ledger
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
