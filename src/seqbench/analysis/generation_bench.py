"""Generation tokens/s against the prompt's length T: the stateful families' step form beside GPT.

    python -m seqbench.analysis.generation_bench --T 128 512 2048 --batch 1 --new-tokens 128 --threads 1 \
        --clock cpu --families shakespeare/lstm shakespeare/mingru shakespeare/gpt --out gen.json

A case is one (family, T): a batch of B random prompts of T tokens, and the family's own
`model.generate(prompt, N, temperature=0)` (greedy, so no sampling cost differs) producing N new
tokens after it. What each family's `generate` does is what is timed:

- the stateful families (`StreamLM`: the recurrent family, the parallel recurrences) read the prompt
  once (the LSTM with its fused kernel, the parallel recurrences with their scan) and then step one
  token at a time from a fixed-size state: O(1) per token whatever T;
- GPT (`generate_windowed`) reads the last `context` tokens of the prompt into its key/value cache
  and then reads one token per step while the sequence fits its context; once it does not (a prompt
  at or past the context, as T = 128 is for the Shakespeare preset's context of 64), the window
  slides and every step re-reads the whole window of `context` tokens: the cache no longer helps.
  A `:context=<n>` variant (`shakespeare/gpt:context=4096`) is the same network with room for the
  whole sequence, where every step reads the cache of all earlier tokens.

The models are the family presets (`conf/preset/<preset>.yaml`, composed as `python src/train.py
preset=<preset>` builds them, with `:key=value` variants as in `seqbench.analysis.bench`), random weights, eval
mode, a vocabulary of `--vocab` (65: Tiny Shakespeare's characters).

Reported per case: the median over the timed repeats of the whole `generate` call (`seconds`:
prompt read and N steps) and of a call making one token (`prompt_seconds`: the prompt read and one
step), so tokens/s = B x N / seconds is what a user waits for, and decode_tokens_per_s = B x (N - 1) /
(seconds - prompt_seconds) the steps alone; the peak memory the case added (the process's resident
set); the model's context (None: no limit) and whether the window slid. Each family runs in its own
child process with its T in increasing order, with the skip rules, the ratios to the baseline at the
same T (`ratio_vs_<baseline>`), the clock choice and the record of `seqbench.analysis.layer_bench`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from seqbench.analysis.bench import preset_config
from seqbench.analysis.layer_bench import Meter, run_all, run_cases
from seqbench.data.spec import TaskSpec
from seqbench.families import presets

MODULE = "seqbench.analysis.generation_bench"
LONG_GPT = "shakespeare/gpt:context=4096"  # GPT with room for every prompt and its new tokens: the cache at work


def default_families() -> list[str]:
    """The compared families' Shakespeare presets (seqbench.families), then GPT with a long context."""
    return [*presets("shakespeare").split(","), LONG_GPT]


def build_model(family: str, vocab: int):
    """A family preset's LightningModule (`seqbench.analysis.bench.preset_config`), eval mode."""
    from hydra.utils import instantiate


    return instantiate(preset_config(family).model, spec=TaskSpec("lm", vocab_size=vocab)).eval()


def timer(family: str):
    """-> time(device, T, args, meter): one case of `family`, the model built once per process."""
    built: dict = {}

    def time_generation(device: torch.device, T: int, args, meter: Meter) -> dict:
        if "model" not in built:
            torch.manual_seed(0)
            built["model"] = build_model(family, args.vocab).to(device)
        model = built["model"]
        meter.start()
        prompt = torch.randint(args.vocab, (args.batch, T), generator=torch.Generator().manual_seed(T)).to(device)
        sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        read = time.process_time if args.clock == "cpu" else time.perf_counter

        def timed(new_tokens: int) -> tuple[float, float]:
            sync()
            start, clock_start = time.perf_counter(), read()
            out = model.generate(prompt, new_tokens, temperature=0)
            sync()
            assert out.shape == (args.batch, T + new_tokens)  # a generate that stopped early would time less
            return time.perf_counter() - start, read() - clock_start

        totals, firsts = [], []
        for i in range(args.warmup + args.repeats):
            total, first = timed(args.new_tokens), timed(1)
            if i >= args.warmup:
                totals.append(total)
                firsts.append(first)
            if total[0] > args.max_case_s or sum(t[0] for t in totals) > args.budget_s:
                break  # the prediction missed: keep what was measured rather than run on
        totals, firsts = totals or [total], firsts or [first]
        seconds = statistics.median(t[1] for t in totals)
        prompt_seconds = statistics.median(t[1] for t in firsts)
        steps = seconds - prompt_seconds
        context = getattr(model, "context", None)
        return {"status": "ok", "seconds": seconds, "prompt_seconds": prompt_seconds,
                "wall_seconds": statistics.median(t[0] for t in totals), "repeats": len(totals),
                "tokens_per_s": args.batch * args.new_tokens / seconds,
                "decode_tokens_per_s": args.batch * (args.new_tokens - 1) / steps if steps > 0 else None,
                "peak_memory_bytes": meter.peak(), "context": context,
                "window_slides": context is not None and T + args.new_tokens > context}

    return time_generation


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--T", type=int, nargs="+", default=[128, 512, 2048], help="prompt lengths")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--new-tokens", type=int, default=128, help="tokens generated after each prompt")
    p.add_argument("--families", nargs="+", default=None,
                   help="family presets, with `:key=value` variants (default: the compared families' "
                        "Shakespeare presets, then " + LONG_GPT + ")")
    p.add_argument("--baseline", default=None, help="the family the ratios divide by (default: the first)")
    p.add_argument("--vocab", type=int, default=65, help="vocabulary size (Tiny Shakespeare: 65 characters)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads (torch.set_num_threads)")
    p.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                   help="tokens/s from wall time, or from the process's CPU time (a shared CPU)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-case-s", type=float, default=20.0, help="skip a case whose generation would take longer")
    p.add_argument("--budget-s", type=float, default=30.0, help="stop repeating a case after this many seconds")
    p.add_argument("--out", default=None, help="JSON file for the results")
    p.add_argument("--method", default=None, help=argparse.SUPPRESS)  # the child's one family
    args = p.parse_args(argv)
    if args.clock == "cpu" and args.device != "cpu":
        p.error("--clock cpu measures CPU work; GPU kernels run outside it")
    if args.new_tokens < 2:
        p.error("--new-tokens must be at least 2: the steps' rate is the call's time less a one-token call's")
    args.families = args.families or default_families()
    args.baseline = args.baseline or args.families[0]
    if args.baseline not in args.families:
        p.error(f"--baseline {args.baseline} is not one of --families")
    return args


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.method:  # a child: one family, rows on stdout
        # the N steps, not the prompt read, are most of a case, and a step's cost does not grow with T (a
        # state; GPT's window once it slides) or grows slowly (the cache): a longer T is predicted to take
        # as long as the shorter one, so it is skipped once a shorter one passed --max-case-s
        run_cases(args.method, args, timer(args.method), exponent=0)
        return {}
    settings = {"new_tokens": args.new_tokens, "vocab": args.vocab, "baseline": args.baseline}
    return run_all(MODULE, argv, args, args.families, (args.baseline,), settings)


if __name__ == "__main__":
    main()
