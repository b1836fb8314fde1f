"""One layer's training speed against T: the fused LSTM, attention and the parallel recurrences.

    python -m seqbench.analysis.layer_bench --device cpu --T 512 2048 --batch 16 --width 256 --threads 1 \
        --clock cpu --out results.json
    python -m seqbench.analysis.layer_bench --device cuda --T 512 2048 8192 --out gpu.json [--bf16]

A case is one (method, T): a batch of B random sequences of T vectors of width D (requires_grad,
as inside a stack) through one layer, forward and backward against a fixed random upstream
gradient. Reported: the median time of the timed repeats after warm-up (wall time, CUDA
synchronised before each clock read; `--clock cpu`: the process's CPU time, for a CPU shared with
other jobs), tokens/s = B x T / median, the peak memory the case added (CUDA: the
allocator's peak; CPU: the process's peak resident set, `ru_maxrss`, above what it held before its
first case; both include the inputs and gradients), and each method's ratio to the fused LSTM (and
to the fused attention kernels) at the same T, measured in the same run.

Methods (each scan implementation runs on every device; `default_method` says which the layers pick):

- lstm_fused: `nn.LSTM(D, D)`, one layer (cuDNN on CUDA, ATen's fused CPU kernels, oneDNN where
  it applies).
- attention_flash / attention_efficient (CUDA) / attention_math: the GPT attention sublayer, qkv
  projection + `F.scaled_dot_product_attention(causal)` + output projection, D / 64 heads, with
  the SDPA backend pinned by `torch.nn.attention.sdpa_kernel` (a backend the device or dtype lacks
  is recorded as an error row: CUDA's flash kernel needs --bf16).
- mingru_<scan>, minlstm_<scan>: `seqbench.nn.min_rnn` with hidden = D, scan in loop / doubling / log.
- ssm_<scan>: `seqbench.nn.ssm.SelectiveSSM(D)` (expand 2, d_state 16): "loop" is its fused
  step-by-step selective scan, "doubling" the materialised coefficients, (B, 256, E, N) at a time,
  through the doubling scan.
- ssd_chunked: `seqbench.nn.ssd.SSD(D)`, Mamba-2's block (expand 2, d_state 64, head dimension 64,
  chunks of 64) with its chunked SSD.

The public pure-PyTorch peers (issue 69), at the same shapes and precision (`pip install -e .[peers]`;
a peer that does not import is an error row saying so):

- mambapy_pscan: `mambapy.mamba.MambaBlock` (PyPI `mambapy`, MIT) with its Blelloch parallel scan, the
  Mamba-1 block at d_state 16, expand 2, Δ's rank ceil(D / 16), as `ssm_loop`.
- ssd_minimal: `ssd_chunked`'s block with its SSD replaced by `ssd_minimal_discrete`, the reference
  of `mamba-ssm` (Apache-2.0; the paper's Listing 1), loaded from the file `--ssd-minimal` names (e.g.
  `mamba_ssm/modules/ssd_minimal.py` of the package's sdist: its Triton import is stubbed, never
  called). The same projections, conv and norm: the rows differ only in the SSD's implementation.

The record keeps the peers' versions (`peers`).

Every method runs in its own child process, its T in increasing order, so the CPU peak memory is
that method's own, and a case killed by the OS for memory loses only that method's larger T.
Before each case the child extrapolates the previous (smaller) T's time and memory — from a short
calibration run at T = 128 for the first — linearly in T (quadratically for the math attention
path); a case predicted to pass `--max-case-s` seconds or the free memory is skipped and says why,
and so are the larger T of that method.

Imports only torch, the standard library and seqbench.nn (pure torch), so it runs on a bare GPU
machine: `PYTHONPATH=src python -m seqbench.analysis.layer_bench ...`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import time
import types
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from seqbench.nn.min_rnn import MinGRU, MinLSTM
from seqbench.nn.scan import METHODS as SCANS
from seqbench.nn.ssd import SSD
from seqbench.nn.ssm import SelectiveSSM
from seqbench.provenance import write_record

CALIBRATION_T = 128
BASELINE = "lstm_fused"
REFERENCES = (BASELINE, "attention_flash", "attention_efficient")  # the ratios' denominators
BACKENDS = ("flash", "efficient", "math")


class AttentionSublayer(nn.Module):
    """GPT's attention sublayer without the norm and residual: qkv proj, causal SDPA, out proj."""

    def __init__(self, width: int, n_head: int, backend: str):
        super().__init__()
        self.n_head, self.backend = n_head, backend
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        B, T, C = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.n_head, C // self.n_head)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # 3 x (B, nh, T, hs)
        backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                   "math": SDPBackend.MATH}[self.backend]
        with sdpa_kernel(backend):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, T, C))  # (B, nh, T, hs) -> (B, T, C)


def methods(device: str, ssd_minimal: str | None = None) -> dict[str, tuple]:
    """name -> (build(width) -> module, forward(module, x) -> output, time exponent in T).

    CUDA adds the memory-efficient SDPA kernel: flash needs fp16/bf16, so in float32 it is the fused
    attention kernel there is (CPU has a flash kernel for float32 and no memory-efficient one)."""
    table = {BASELINE: (lambda D: nn.LSTM(D, D, batch_first=True), lambda m, x: m(x)[0], 1)}
    for backend in BACKENDS:
        if backend != "efficient" or device == "cuda":
            table[f"attention_{backend}"] = (lambda D, b=backend: AttentionSublayer(D, max(1, D // 64), b),
                                             lambda m, x: m(x), 2 if backend == "math" else 1)
    for family, cls in (("mingru", MinGRU), ("minlstm", MinLSTM)):
        for scan in SCANS:
            table[f"{family}_{scan}"] = (lambda D, cls=cls, scan=scan: cls(D, D, scan=scan),
                                         lambda m, x: m(x)[0], 1)
    for scan in SCANS:
        if scan != "log":  # the SSM's b = Δ B u changes sign: the log-space scan does not apply
            table[f"ssm_{scan}"] = (lambda D, scan=scan: SelectiveSSM(D, scan=scan), lambda m, x: m(x)[0], 1)
    table["ssd_chunked"] = (lambda D: SSD(D), lambda m, x: m(x)[0], 1)
    table["mambapy_pscan"] = (_mambapy_block, lambda m, x: m(x), 1)
    table["ssd_minimal"] = (lambda D: _SSDMinimal(D, ssd_minimal), lambda m, x: m(x)[0], 1)
    return table


def _mambapy_block(width: int) -> nn.Module:
    """mambapy's Mamba-1 block with its parallel scan, at `SelectiveSSM`'s sizes."""
    from mambapy.mamba import MambaBlock, MambaConfig

    return MambaBlock(MambaConfig(d_model=width, n_layers=1, d_state=16, expand_factor=2, d_conv=4, pscan=True))


def load_ssd_minimal(path: str | None):
    """`ssd_minimal_discrete` from mamba-ssm's `ssd_minimal.py` at `path`, without mamba-ssm installed: the
    file's one import of the package (the fused Triton kernel it compares with) gets an empty stand-in."""
    if not path:
        raise FileNotFoundError("no --ssd-minimal: give the path of mamba-ssm's mamba_ssm/modules/ssd_minimal.py")
    names = ["mamba_ssm", "mamba_ssm.ops", "mamba_ssm.ops.triton", "mamba_ssm.ops.triton.ssd_combined"]
    for name in names:
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules[names[-1]].mamba_chunk_scan_combined = None
    spec = importlib.util.spec_from_file_location("ssd_minimal", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ssd_minimal_discrete


def _package_version(path: str | None) -> str | None:
    """The `__version__` in the `__init__.py` of the package two folders above `path` (mamba_ssm/modules/x.py)."""
    init = Path(path).resolve().parents[1] / "__init__.py" if path else None
    if init is None or not init.exists():
        return None
    found = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", init.read_text())
    return found.group(1) if found else None


class _SSDMinimal(SSD):
    """`SSD` with mamba-ssm's `ssd_minimal_discrete` as its SSD (same weights, conv, norm and CPU pieces)."""

    def __init__(self, width: int, path: str | None):
        super().__init__(width)
        self.reference = load_ssd_minimal(path)

    def ssd(self, x, log_a, B, C, h0):
        # ssd_minimal takes whole chunks (a window shorter than one is one chunk, as `ssd_chunked` makes
        # it) and the initial state with a chunk axis: (B, 1, H, P, N)
        block = min(self.chunk, x.shape[1])
        return self.reference(x, log_a, B, C, block, None if h0 is None else h0.unsqueeze(1))


def peer_versions(ssd_minimal: str | None) -> dict:
    """The peers' versions as installed (mambapy) or as found beside the file (mamba-ssm)."""
    try:
        mambapy = importlib.metadata.version("mambapy")
    except importlib.metadata.PackageNotFoundError:
        mambapy = None
    return {"mambapy": mambapy, "mamba_ssm": _package_version(ssd_minimal), "ssd_minimal": ssd_minimal}


def _free_memory(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    with open("/proc/meminfo") as f:
        info = dict(line.split(":", 1) for line in f)
    return int(info["MemAvailable"].split()[0]) * 1024


class Meter:
    """Peak memory added by a case: the CUDA allocator's, or the process's resident set on CPU."""

    def __init__(self, device: torch.device):
        self.device = device
        self.base = self._rss()

    @staticmethod
    def _rss() -> int:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB

    def start(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(self.device)
            self.cuda_base = torch.cuda.memory_allocated(self.device)

    def peak(self) -> int:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device) - self.cuda_base
        # ru_maxrss never falls, and a method runs its T in increasing order, so its high-water mark
        # after a case is that case's peak (a smaller T's peak is below it)
        return self._rss() - self.base


def time_case(build, forward, device, T: int, args, meter: Meter) -> dict:
    """Warm-up then timed fwd+bwd repeats of one (method, T); the budget bounds the repeats."""
    torch.manual_seed(0)
    dtype_ctx = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if args.bf16 else None
    meter.start()
    module = build(args.width).to(device)
    x = torch.randn(args.batch, T, args.width, device=device, requires_grad=True)
    grad = None
    times, cpu_times = [], []
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for i in range(args.warmup + args.repeats):
        x.grad = None
        module.zero_grad(set_to_none=True)
        sync()
        start, cpu_start = time.perf_counter(), time.process_time()
        if dtype_ctx is None:
            out = forward(module, x)
        else:
            with dtype_ctx():
                out = forward(module, x)
        if grad is None:
            grad = torch.randn_like(out)
        out.backward(grad)
        sync()
        elapsed, cpu_elapsed = time.perf_counter() - start, time.process_time() - cpu_start
        if i >= args.warmup:
            times.append(elapsed)
            cpu_times.append(cpu_elapsed)
        if elapsed > args.max_case_s or sum(times) > args.budget_s:
            break  # the prediction missed: keep what was measured rather than run on
        del out
    # a warm-up past the limit leaves no timed repeat: that run's time then, on the clock asked for (on
    # a loaded CPU its wall time can be 10x its CPU time, and the rows of one table must share a clock)
    wall = statistics.median(times) if times else elapsed
    cpu = statistics.median(cpu_times) if cpu_times else cpu_elapsed
    seconds = cpu if args.clock == "cpu" and cpu is not None else wall
    return {"status": "ok", "seconds": seconds, "wall_seconds": wall, "cpu_seconds": cpu,
            "repeats": len(times),
            "tokens_per_s": args.batch * T / seconds, "peak_memory_bytes": meter.peak(),
            "load_1min": os.getloadavg()[0]}


def run_method(name: str, args) -> list[dict]:
    """All T of one layer method, in this process (the child), skipping what would not fit."""
    build, forward, exponent = methods(args.device, args.ssd_minimal)[name]
    return run_cases(name, args, lambda device, T, a, meter: time_case(build, forward, device, T, a, meter),
                     exponent)


def _why(err: Exception) -> str:
    """An exception in one line: its type and the first line of its message (an assert may have none)."""
    first = (str(err).splitlines() or [""])[0][:200]
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


def run_cases(name: str, args, timer, exponent: int) -> list[dict]:
    """All `args.T` of one method in this process (the child), each timed by `timer(device, T, args,
    meter)` -> a row's measurements (`status`, `wall_seconds`, `peak_memory_bytes`, ...), skipping
    what would not fit: the time and memory of a case are predicted from the previous T as growing
    like T ** exponent. `seqbench.analysis.generation_bench` times generation with it."""
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    rows, prev, failure = [], None, None
    try:
        # one tiny case first, so the memory baseline already holds the kernels' libraries and buffers
        once = argparse.Namespace(**{**vars(args), "warmup": 0, "repeats": 1})
        timer(device, 2, once, Meter(device))
    except Exception as err:  # a backend the device lacks, an unsupported dtype: say so, for every T
        failure = f"error: {_why(err)}"
    meter = Meter(device)
    for T in sorted(args.T):
        row = {"method": name, "T": T}
        reason = failure
        if reason is None and prev is None:
            try:
                prev = {"T": CALIBRATION_T, **timer(device, CALIBRATION_T, args, meter)}
            except Exception as err:
                reason = f"error: {_why(err)}"
        if reason is None and prev["status"] != "ok":
            reason = "skipped: a shorter T was skipped"
        if reason is None:
            # time and memory grow alike: linearly, or quadratically with the math path's T x T scores
            scale = (T / prev["T"]) ** exponent
            seconds, memory = prev["wall_seconds"] * scale, prev["peak_memory_bytes"] * scale
            if seconds > args.max_case_s:
                reason = f"skipped: predicted {seconds:.0f} s per case > {args.max_case_s:g} s"
            elif memory > 0.8 * _free_memory(device):
                reason = (f"skipped: predicted {memory / 2**30:.1f} GiB > 80 % of "
                          f"the free {_free_memory(device) / 2**30:.1f} GiB")
        if reason is None:
            try:
                row.update(timer(device, T, args, meter))
            except torch.OutOfMemoryError as err:
                row.update(status=f"out of memory: {_why(err)}")
            except Exception as err:
                row.update(status=f"error: {_why(err)}")
            if device.type == "cuda":
                torch.cuda.empty_cache()
        else:
            row["status"] = reason
        rows.append(row)
        print(json.dumps(row), flush=True)
        prev = row if row["status"] == "ok" else {"status": "skipped", "T": T}
    return rows


def spawn(module: str, name: str, argv: list[str], lengths: list[int]) -> list[dict]:
    """Run one method in a child (`python -m <module> <argv> --method <name>`, printing its rows as JSON
    lines); a child the OS kills (memory) loses only its unreported T."""
    proc = subprocess.run([sys.executable, "-m", module, *argv, "--method", name], capture_output=True, text=True)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0:
        done = {r["T"] for r in rows}
        why = f"child exited {proc.returncode} (-9: killed, e.g. for memory): {proc.stderr.strip()[-300:]}"
        rows += [{"method": name, "T": T, "status": why} for T in sorted(set(lengths) - done)]
    return rows


def add_ratios(rows: list[dict], references: tuple[str, ...] = REFERENCES) -> None:
    """Each row's tokens/s over the fused LSTM's (and the fused attention kernels') at the same T."""
    for ref_name in references:
        ref = {r["T"]: r["tokens_per_s"] for r in rows if r["method"] == ref_name and r["status"] == "ok"}
        for r in rows:
            if r["status"] == "ok" and r["T"] in ref:
                r[f"ratio_vs_{ref_name}"] = r["tokens_per_s"] / ref[r["T"]]


def machine(device: torch.device) -> dict:
    """Where the numbers come from: CPU model (lscpu), GPU name, torch, threads, date."""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        cpu = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines()
                    if line.startswith("Model name")), None)
    except OSError:
        cpu = None
    return {"device": device.type, "cpu_model": cpu,
            "gpu_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
            "torch": torch.__version__, "cpu_count": os.cpu_count(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def header(references: tuple[str, ...] = REFERENCES) -> str:
    ratios = "".join(f"{'x ' + ref[:9]:>12}" for ref in references)
    return f"{'method':<20}{'T':>7}{'tokens/s':>12}{ratios}{'peak MiB':>10}  status"


def table(rows: list[dict], references: tuple[str, ...] = REFERENCES) -> str:
    lines = []
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"{r['method']:<20}{r['T']:>7}{'':>{22 + 12 * len(references)}}  {r['status']}")
            continue
        ratios = "".join(f"{r.get('ratio_vs_' + ref, float('nan')):>12.2f}" for ref in references)
        lines.append(f"{r['method']:<20}{r['T']:>7}{r['tokens_per_s']:>12.0f}{ratios}"
                     f"{r['peak_memory_bytes'] / 2**20:>10.0f}  ok")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--T", type=int, nargs="+", default=[512, 2048])
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--threads", type=int, default=1, help="CPU threads (torch.set_num_threads)")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast (CUDA)")
    p.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                   help="tokens/s from wall time, or from the process's CPU time (user + sys): on a "
                        "shared CPU other jobs' load stretches wall time but not CPU time (with "
                        "--threads 1 the two agree on an idle machine)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--max-case-s", type=float, default=20.0,
                   help="skip a case whose fwd+bwd would take longer")
    p.add_argument("--budget-s", type=float, default=30.0,
                   help="stop repeating a case after this many seconds")
    p.add_argument("--methods", nargs="+", default=None, help="a subset of the methods (default: all)")
    p.add_argument("--ssd-minimal", default=None,
                   help="mamba-ssm's mamba_ssm/modules/ssd_minimal.py (e.g. from its sdist), for the ssd_minimal row")
    p.add_argument("--out", default=None, help="JSON file for the results")
    p.add_argument("--method", default=None, help=argparse.SUPPRESS)  # the child's one method
    args = p.parse_args(argv)
    if args.bf16 and args.device != "cuda":
        p.error("--bf16 is a CUDA autocast; leave it out on CPU")
    if args.clock == "cpu" and args.device != "cpu":
        p.error("--clock cpu measures CPU work; GPU kernels run outside it")
    unknown = set(args.methods or []) - set(methods(args.device))
    if unknown:
        p.error(f"unknown methods {sorted(unknown)} on {args.device}; "
                f"choose from {list(methods(args.device))}")
    return args


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.method:  # a child: one method, rows on stdout
        run_method(args.method, args)
        return {}
    settings = {"width": args.width, "bf16": args.bf16, "peers": peer_versions(args.ssd_minimal)}
    return run_all("seqbench.analysis.layer_bench", argv, args,
                   args.methods or list(methods(args.device)), REFERENCES, settings)


def run_all(module: str, argv: list[str], args, names: list[str], references: tuple[str, ...],
            settings: dict) -> dict:
    """The parent: each method in its own child (`spawn`), the ratios to `references` at each T, and
    the record — machine, command, the common settings of `args` and `settings` — written to `args.out`
    after every method, so a run cut short keeps what it measured."""
    started = time.time()
    result = {**machine(torch.device(args.device)), "command": f"python -m {module} " + shlex.join(argv),
              "threads": args.threads, "batch": args.batch, **settings, "clock": args.clock,
              "warmup": args.warmup, "repeats": args.repeats, "max_case_s": args.max_case_s, "results": []}
    print(header(references), flush=True)
    for name in names:
        new = spawn(module, name, argv, args.T)
        print(table(new, references), flush=True)
        result["results"] += new
        add_ratios(result["results"], references)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
    print("\n" + header(references) + "\n" + table(result["results"], references))
    if args.out:  # the ledger: the JSON names its machine and date; the record adds the commit and wall time
        write_record(Path(args.out).parent, [Path(args.out).name], result["command"], started)
    return result


if __name__ == "__main__":
    main()
