"""Decoded tokens/s with and without the key/value cache, against the number of decoded tokens.

    python -m seqbench.analysis.decode_bench                           # CPU, T = 16 .. 256, batch 128
    python -m seqbench.analysis.decode_bench --threads 1 --beam 5 --lengths 16,32,64
    python -m seqbench.analysis.decode_bench --families gpt --device cuda

The models are the families whose decoding keeps a key/value cache (`kv_cache`) at their default
sizes (`conf/model/<family>.yaml`, composed as `src/train.py model=<family> data=multi30k` or, for an
LM, `data=ptb` would compose them: the recipe included), with random weights in eval mode: the Transformer encoder-decoder and T5 on a translation spec shaped like
Multi30k's defaults (source vocabulary 8,000, target 6,000; T5 one table for both), GPT as a
language model (vocabulary `--vocab`). A case decodes exactly T tokens per sentence for a batch of
`--batch` sentences (128: Multi30k's `eval_batch_size`): `seqbench.nn.decoding.greedy` (or
`beam_search` with `--beam`, B x K rows) from a source of `--src-len` random tokens (Multi30k's
German test sentences average 11 words, ~14 subwords), with an <eos> that never matches so no row
stops early; GPT `generate`s T tokens greedily from a one-token prompt (its context is 256, so at
T = 256 the last step re-reads the full window, with or without the cache).

Reported per (family, T, cache on/off): the median wall time of `--repeats` runs after one short
warm-up run, and decoded tokens/s = batch x T / time. Without the cache step t re-reads all t
tokens, so a case costs O(T²) and grows fast: a case is skipped, and says why, when its time
extrapolated quadratically from the shorter length would pass `--max-case-s`.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

import torch

from seqbench.compose import compose_final
from seqbench.data.spec import TaskSpec
from seqbench.entry import register_resolvers
from seqbench.families import FAMILIES
from seqbench.nn.decoding import beam_search
from seqbench.tables import table_lines

FIELDS = ["device", "family", "batch", "beam", "length", "cache", "status", "seconds", "tokens_per_s", "load_1min"]
SRC_VOCAB, TGT_VOCAB = 8000, 6000  # conf/data/multi30k.yaml: vocab_size, tgt_vocab_size
BOS, EOS, PAD, NEVER = 2, 3, 0, -1


def cached_families() -> list[str]:
    """The families whose decoding keeps a key/value cache (`kv_cache`), in table order."""
    return [name for name, family in FAMILIES.items() if family.cls.kv_cache]


def translates(family: str) -> bool:
    """Timed as a translator (beam search from a source) when it translates, else as an LM (`generate`)."""
    return "translation" in FAMILIES[family].tasks


def build_model(family: str, vocab: int):
    """A family at the sizes of `conf/model/<family>.yaml` as `python src/train.py model=<family>
    data=<ptb or multi30k>` builds it (seqbench.compose: the recipe included), random weights, eval mode."""
    from hydra.utils import instantiate


    register_resolvers()
    cfg = compose_final([f"model={family}", f"data={'multi30k' if translates(family) else 'ptb'}", "logger=csv"])
    if not translates(family):
        spec = TaskSpec("lm", vocab_size=vocab)
    else:
        spec = TaskSpec("translation", src_vocab_size=SRC_VOCAB, tgt_vocab_size=TGT_VOCAB, pad_id=PAD, bos_id=BOS,
                        eos_id=EOS, max_len=256)
    return instantiate(cfg.model, spec=spec).eval()


def decoder(model, family: str, batch: int, beam: int, src_len: int, vocab: int, device: torch.device):
    """-> run(T, use_cache): decodes T tokens for every sentence of the batch."""
    g = torch.Generator().manual_seed(0)
    if not translates(family):
        prompt = torch.randint(vocab, (batch, 1), generator=g).to(device)
        return lambda T, use_cache: model.generate(prompt, T, temperature=0, use_cache=use_cache)
    src = torch.randint(4, SRC_VOCAB, (batch, src_len), generator=g).to(device)
    sources = {"src": src, "src_lengths": torch.full((batch,), src_len, device=device)}
    return lambda T, use_cache: beam_search(model, sources, BOS, NEVER, PAD, T, beam, use_cache=use_cache)


def _skip_reason(prev: dict | None, length: int, max_case_s: float) -> str | None:
    if prev is None:
        return None
    if prev["status"] != "ok":
        return "skipped: a shorter length was skipped"
    predicted = prev["seconds"] * (length / prev["length"]) ** 2
    if predicted > max_case_s:
        return f"skipped: ~{predicted:.0f} s extrapolated from T={prev['length']} > --max-case-s"
    return None


def run(families: list[str], lengths: list[int], batch: int = 128, beam: int = 1, src_len: int = 16,
        vocab: int = 10_000, device: str = "cpu", repeats: int = 1, max_case_s: float = 300.0,
        threads: int | None = None, out: Path | None = None) -> list[dict]:
    if threads:
        torch.set_num_threads(threads)
    dev = torch.device(device)
    device_name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"device: {device_name}; batch {batch}, beam {beam}, source length {src_len}", flush=True)
    rows: list[dict] = []
    for family in families:
        torch.manual_seed(0)
        model = build_model(family, vocab).to(dev)
        decode = decoder(model, family, batch, beam if family != "gpt" else 1, src_len, vocab, dev)
        for use_cache in (True, False):
            decode(4, use_cache)  # warm-up: allocator, kernels, lazy tables
            prev = None
            for length in sorted(lengths):
                row = {"device": device_name, "family": family, "batch": batch, "beam": beam if family != "gpt" else 1,
                       "length": length, "cache": use_cache}
                reason = _skip_reason(prev, length, max_case_s)
                if reason:
                    row["status"] = reason
                else:
                    times = []
                    for _ in range(repeats):
                        if dev.type == "cuda":
                            torch.cuda.synchronize(dev)
                        t0 = time.perf_counter()
                        decode(length, use_cache)
                        if dev.type == "cuda":
                            torch.cuda.synchronize(dev)
                        times.append(time.perf_counter() - t0)
                    seconds = statistics.median(times)
                    # a shared machine's other work slows every kernel: record it
                    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
                    row.update(status="ok", seconds=seconds, tokens_per_s=batch * length / seconds, load_1min=load)
                    prev = row
                rows.append(row)
                _print_row(row)
    print(table(rows))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "decode_bench.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, FIELDS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
        (out / "decode_bench.md").write_text(table(rows) + "\n")
        print(f"wrote {out / 'decode_bench.csv'} and {out / 'decode_bench.md'}")
    return rows


def _print_row(row: dict) -> None:
    head = f"{row['family']:12s} T={row['length']:<4d} cache={'on ' if row['cache'] else 'off'}"
    if row["status"] != "ok":
        print(f"{head} {row['status']}", flush=True)
        return
    print(f"{head} {row['seconds']:8.2f} s {row['tokens_per_s']:9.0f} tok/s  load {row['load_1min']:.2f}", flush=True)


def table(rows: list[dict]) -> str:
    """Markdown: one line per (family, T), tokens/s with and without the cache and their ratio."""
    lines = []
    keys = list(dict.fromkeys((r["family"], r["length"]) for r in rows))
    for family, length in keys:
        pair = {r["cache"]: r for r in rows if r["family"] == family and r["length"] == length}
        on, off = pair.get(True), pair.get(False)

        def cell(r):
            return f"{r['tokens_per_s']:,.0f}" if r and r["status"] == "ok" else "skipped"

        ratio = (f"{on['tokens_per_s'] / off['tokens_per_s']:.1f}x"
                 if on and off and on["status"] == off["status"] == "ok" else "")
        lines.append([family, length, cell(on), cell(off), ratio])
    return "\n".join(table_lines(["family", "decoded tokens T", "tok/s with cache", "tok/s without", "speed-up"], lines,
                                 align="lrrrr"))


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m seqbench.analysis.decode_bench",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto (cuda when available)")
    parser.add_argument("--families", default=",".join(cached_families()), help="conf/model/<family>.yaml")
    parser.add_argument("--lengths", default="16,32,64,128,256")
    parser.add_argument("--batch", type=int, default=128, help="sentences (Multi30k's eval_batch_size)")
    parser.add_argument("--beam", type=int, default=1, help="1: greedy; K: beam search, B x K rows")
    parser.add_argument("--src-len", type=int, default=16, help="source tokens per sentence")
    parser.add_argument("--vocab", type=int, default=10_000, help="GPT's vocabulary")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--max-case-s", type=float, default=300.0)
    parser.add_argument("--threads", type=int, help="CPU threads (default: torch's)")
    parser.add_argument("--out", type=Path, help="output folder (default outputs/decode_bench/<device>-<time>)")
    args = parser.parse_args(argv)
    device = ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    out = args.out or Path("outputs") / "decode_bench" / f"{device}-{datetime.now():%Y-%m-%d_%H-%M-%S}"
    return run(args.families.split(","), _ints(args.lengths), args.batch, args.beam, args.src_len, args.vocab,
               device, args.repeats, args.max_case_s, args.threads, out)


if __name__ == "__main__":
    main(sys.argv[1:])
