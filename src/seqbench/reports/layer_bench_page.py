"""The speed benchmarks' tables on an experiment page, made from the recorded JSON, never typed.

    python -m seqbench.reports.layer_bench_page experiments/parallel-recurrences.md          # rewrite
    python -m seqbench.reports.layer_bench_page experiments/parallel-recurrences.md --check  # differs? exit 1

A page marks each table with the record it shows, relative to the page:

    <!-- layer-bench: records/2026-11-26-h100/layer_bench_cuda_fp32.json -->
    ...table, rewritten by this command...
    <!-- /layer-bench -->

and each check of issue 35's targets (`TARGETS`) against a record with `<!-- layer-targets: ... -->`, of
issue 69's (`TARGETS_69`) with `<!-- layer-targets-69: ... -->`.
The other benchmarks' records have their own markers: `generation-bench` (seqbench.analysis.
generation_bench: generation tokens/s against the prompt's length), `train-bench` and `train-targets`
(`python -m seqbench.analysis.bench --out DIR`'s `bench.json`: a whole model's training step).

Everything between the markers is replaced; the prose around them stays as written. A table row is
a method (a family preset), a column a sequence length; a cell gives tokens/s and the ratio to the
baseline measured in the same run (the only comparison the benchmarks vouch for: the fused LSTM, the
generation record's `baseline`, the training record's first family), or why the case did not run.
The caption names the hardware, the software, the date and the command, read from the record.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from seqbench.tables import table

BLOCK = re.compile(r"(<!-- (?P<kind>layer-bench|layer-targets-69|layer-targets|generation-bench|train-bench|train-targets): "
                   r"(?P<path>\S+) -->\n)(?P<body>.*?)(<!-- /(?P=kind) -->)", re.S)
# issue 35's targets: (device, method, reference, lengths, least ratio); a ratio is method / reference
# tokens/s at the same T in the same run
TARGETS = [
    ("cpu", "mingru_loop", "lstm_fused", (512,), 1.5), ("cpu", "mingru_loop", "lstm_fused", (2048,), 1.3),
    ("cpu", "minlstm_loop", "lstm_fused", (512,), 1.5), ("cpu", "minlstm_loop", "lstm_fused", (2048,), 1.3),
    ("cpu", "mingru_loop", "attention_flash", (512,), 1.7), ("cpu", "mingru_loop", "attention_flash", (2048,), 2.5),
    ("cpu", "minlstm_loop", "attention_flash", (512,), 1.7), ("cpu", "minlstm_loop", "attention_flash", (2048,), 2.5),
    ("cpu", "ssm_loop", "lstm_fused", (512, 2048), 0.5),
    ("cuda", "mingru_doubling", "lstm_fused", (512,), 1.0), ("cuda", "mingru_doubling", "lstm_fused", (2048, 8192), 3.0),
]
# issue 69's (`<!-- layer-targets-69: ... -->`): Mamba-2's SSD and the Mamba-1 block against the fused LSTM
# and the public pure-PyTorch peers; a target of None shows the ratio without judging it (SSD against the
# ssd_minimal reference: the same block, only the SSD's implementation differs)
TARGETS_69 = [
    ("cpu", "ssd_chunked", "lstm_fused", (512,), 1.5), ("cpu", "ssd_chunked", "lstm_fused", (2048,), 2.0),
    ("cpu", "ssm_loop", "lstm_fused", (512, 2048), 0.5), ("cpu", "ssm_loop", "mambapy_pscan", (512, 2048), 5.0),
    ("cpu", "ssd_chunked", "ssd_minimal", (512, 2048), None),
    ("cuda", "ssd_chunked", "lstm_fused", (2048, 8192), 3.0), ("cuda", "ssm_doubling", "lstm_fused", (2048,), 1.0),
    ("cuda", "ssm_doubling", "mambapy_pscan", (2048,), 5.0), ("cuda", "ssd_chunked", "ssd_minimal", (2048,), None),
]
# issue 35's whole-model target: `model=mingru data=shakespeare_char` >= 1.2x `model=lstm` in training tokens/s
# at the same width and layers (the LSTM preset's 2 x 221), at the presets' training window (bptt 64)
TRAIN_TARGETS = [("shakespeare/mingru:d_model=221:num_layers=2", "shakespeare/lstm", (64,), 1.2)]


def _cell(row: dict | None) -> str:
    if row is None:
        return "–"
    if row["status"] != "ok":
        return "skipped" if row["status"].startswith("skipped") else "no kernel" if "kernel" in row["status"] else "failed"
    ratio = row.get("ratio_vs_lstm_fused")
    return f"{row['tokens_per_s'] / 1e3:,.1f}k" + (f" ({ratio:.2f}x)" if ratio is not None else "")


def render(record: dict) -> str:
    """One markdown table (and its caption) of a layer_bench record."""
    clock = record.get("clock", "wall")
    caption = (f"*{_where(record)}; torch {record['torch']}; {'bf16 autocast' if record['bf16'] else 'float32'}; "
               f"B = {record['batch']}, D = {record['width']}; median of {record['repeats']} after "
               f"{record['warmup']} warm-up, {clock} clock; {record['date']}; "
               f"`{record['command'].replace(' --out results.json', '')}`{_peers(record)}.*")
    return _grid(caption, record["results"], "method", "T", _cell)


def _peers(record: dict) -> str:
    """The peers' versions a record names (issue 69's runs and later)."""
    peers = record.get("peers") or {}
    named = [f"{name} {peers[name]}" for name in ("mambapy", "mamba_ssm") if peers.get(name)]
    return f"; peers: {', '.join(named)}" if named else ""


def _where(record: dict) -> str:
    return record["gpu_name"] or f"{record['cpu_model']}, {record['threads']} thread(s)"


def _grid(caption: str, results: list[dict], name: str, length: str, cell, extra: tuple | None = None,
          title: str | None = None) -> str:
    """The caption, then a table with a row per `name` (in the record's order, headed `title`), a column
    per `length`, and `extra` = (header, name -> text), a column after the name."""
    lengths = sorted({r[length] for r in results})
    names = list(dict.fromkeys(r[name] for r in results))
    by = {(r[name], r[length]): r for r in results}
    head = [title or name, *([extra[0]] if extra else []), *(f"T = {t:,}" for t in lengths)]
    rows = [[n, *([extra[1](n)] if extra else []), *(cell(by.get((n, t))) for t in lengths)] for n in names]
    return "\n".join([caption, "", table(head, rows, align="l" + "r" * (len(head) - 1))]) + "\n"


def render_targets(record: dict) -> str:
    """Issue 35's layer targets for the record's device: the ratio measured, and whether it is met."""
    tps = {(r["method"], r["T"]): r["tokens_per_s"] for r in record["results"] if r["status"] == "ok"}
    return _targets(tps, [t[1:] for t in TARGETS if t[0] == record["device"]])


def render_targets_69(record: dict) -> str:
    """Issue 69's layer targets for the record's device (the SSD, the Mamba-1 block, the peers)."""
    tps = {(r["method"], r["T"]): r["tokens_per_s"] for r in record["results"] if r["status"] == "ok"}
    return _targets(tps, [t[1:] for t in TARGETS_69 if t[0] == record["device"]])


def render_train_targets(record: dict) -> str:
    """Issue 35's whole-model training target against a `seqbench.analysis.bench` record."""
    tps = {(r["family"], r["length"]): r["tokens_per_s"] for r in record["results"] if r["status"] == "ok"}
    return _targets(tps, TRAIN_TARGETS)


def _targets(tps: dict, targets: list[tuple]) -> str:
    rows = []
    for method, ref, lengths, least in targets:
        for t in lengths:
            if (method, t) in tps and (ref, t) in tps:
                ratio = tps[method, t] / tps[ref, t]
                met = "–" if least is None else "yes" if ratio >= least else "**no**"
                rows.append([method, ref, f"{t:,}", _least(least), f"{ratio:.2f}x", met])
            else:
                rows.append([method, ref, f"{t:,}", _least(least), "not measured", "–"])
    return table(["method", "against", "T", "target", "measured", "met"], rows, align="llrrrl") + "\n"


def _least(least: float | None) -> str:
    return "none" if least is None else f"≥ {least:g}x"


def render_generation(record: dict) -> str:
    """A generation_bench record: tokens/s (and the ratio to the baseline) per family and prompt length,
    the family's context (GPT's window slides once prompt and new tokens pass it) and peak memory."""
    ratio_key = f"ratio_vs_{record['baseline']}"

    def cell(row: dict | None) -> str:
        if row is None or row["status"] != "ok":
            return "–" if row is None else row["status"].split(":")[0]
        return (f"{row['tokens_per_s']:,.0f} ({row[ratio_key]:.2f}x), {row['peak_memory_bytes'] / 2**20:,.0f} MiB"
                if ratio_key in row else f"{row['tokens_per_s']:,.0f}")

    def context(family: str) -> str:
        known = [r["context"] for r in record["results"] if r["method"] == family and "context" in r]
        return f"{known[0]:,}" if known and known[0] is not None else "none"

    caption = (f"*{_where(record)}; torch {record['torch']}; B = {record['batch']}, "
               f"{record['new_tokens']} tokens generated greedily after a random prompt of T tokens, vocabulary "
               f"{record['vocab']}; median of {record['repeats']} after {record['warmup']} warm-up, "
               f"{record['clock']} clock; {record['date']}; `{record['command']}`.*")
    return _grid(caption, record["results"], "method", "T", cell, ("context", context), "preset")


def render_train(record: dict) -> str:
    """A `seqbench.analysis.bench` record: training tokens/s per family preset and length, with the ratio to the
    record's first family, the non-embedding parameters and the step's peak memory."""
    first = record["results"][0]["family"]
    batches = sorted({r["batch"] for r in record["results"]})
    base = {r["length"]: r["tokens_per_s"] for r in record["results"] if r["family"] == first and r["status"] == "ok"}

    def cell(row: dict | None) -> str:
        if row is None or row["status"] != "ok":
            return "–" if row is None else row["status"].split(":")[0]
        ratio = f" ({row['tokens_per_s'] / base[row['length']]:.2f}x)" if row["length"] in base else ""
        return f"{row['tokens_per_s'] / 1e3:,.1f}k{ratio}, {row['peak_mem_mb']:,.0f} MB"

    def params(family: str) -> str:
        known = [r["params_non_embedding"] for r in record["results"] if r["family"] == family and r["status"] == "ok"]
        return f"{known[0]:,}" if known else "–"

    caption = (f"*{_where(record)}; torch {record['torch']}; B = {', '.join(map(str, batches))}, "
               f"vocabulary {record['vocab']}; forward, loss and backward of one step; {record['clock']} clock; "
               f"ratios to {first}; {record['date']}; `{record['command']}`.*")
    return _grid(caption, record["results"], "family", "length", cell, ("parameters (non-embedding)", params),
                 "preset")


RENDERERS = {"layer-bench": render, "layer-targets": render_targets, "layer-targets-69": render_targets_69,
             "generation-bench": render_generation,
             "train-bench": render_train, "train-targets": render_train_targets}


def rewrite(page: Path) -> str:
    """The page with every marked table made anew from its record."""
    text = page.read_text()

    def fill(match: re.Match) -> str:
        record = json.loads((page.parent / match["path"]).read_text())
        return match.group(1) + RENDERERS[match["kind"]](record) + match.group(5)

    return BLOCK.sub(fill, text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("page", type=Path)
    p.add_argument("--check", action="store_true", help="exit 1 if the page differs from its records")
    args = p.parse_args(argv)
    new = rewrite(args.page)
    if args.check:
        if new != args.page.read_text():
            print(f"{args.page}: its benchmark tables differ from their records; run without --check", file=sys.stderr)
            return 1
        return 0
    args.page.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
