"""The layer benchmark's tables on an experiment page, made from the recorded JSON, never typed.

    python -m seqbench.analysis.layer_bench_page experiments/parallel-recurrences.md          # rewrite
    python -m seqbench.analysis.layer_bench_page experiments/parallel-recurrences.md --check  # differs? exit 1

A page marks each table with the record it shows, relative to the page:

    <!-- layer-bench: records/2026-11-26-h100/layer_bench_cuda_fp32.json -->
    ...table, rewritten by this command...
    <!-- /layer-bench -->

and each check of issue 35's targets (`TARGETS`) against a record with `<!-- layer-targets: ... -->`.

Everything between the markers is replaced; the prose around them stays as written. A table row is
a method, a column a sequence length; a cell gives tokens/s and the ratio to the fused LSTM measured
in the same run (the only comparison the benchmark vouches for), or why the case did not run. The
caption names the hardware, the software, the date and the command, read from the record.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

BLOCK = re.compile(r"(<!-- layer-(?P<kind>bench|targets): (?P<path>\S+) -->\n)(?P<body>.*?)(<!-- /layer-(?P=kind) -->)",
                   re.S)
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


def _cell(row: dict | None) -> str:
    if row is None:
        return "–"
    if row["status"] != "ok":
        return "skipped" if row["status"].startswith("skipped") else "no kernel" if "kernel" in row["status"] else "failed"
    ratio = row.get("ratio_vs_lstm_fused")
    return f"{row['tokens_per_s'] / 1e3:,.1f}k" + (f" ({ratio:.2f}x)" if ratio is not None else "")


def render(record: dict) -> str:
    """One markdown table (and its caption) of a layer_bench record."""
    lengths = sorted({r["T"] for r in record["results"]})
    methods = list(dict.fromkeys(r["method"] for r in record["results"]))
    by = {(r["method"], r["T"]): r for r in record["results"]}
    where = record["gpu_name"] or f"{record['cpu_model']}, {record['threads']} thread(s)"
    clock = record.get("clock", "wall")
    caption = (f"*{where}; torch {record['torch']}; {'bf16 autocast' if record['bf16'] else 'float32'}; "
               f"B = {record['batch']}, D = {record['width']}; median of {record['repeats']} after "
               f"{record['warmup']} warm-up, {clock} clock; {record['date']}; "
               f"`{record['command'].replace(' --out results.json', '')}`.*")
    head = "| method | " + " | ".join(f"T = {t:,}" for t in lengths) + " |"
    rule = "|---|" + "---:|" * len(lengths)
    rows = [f"| {m} | " + " | ".join(_cell(by.get((m, t))) for t in lengths) + " |" for m in methods]
    return "\n".join([caption, "", head, rule, *rows]) + "\n"


def render_targets(record: dict) -> str:
    """Issue 35's targets for the record's device: the ratio measured, and whether it is met."""
    tps = {(r["method"], r["T"]): r["tokens_per_s"] for r in record["results"] if r["status"] == "ok"}
    lines = ["| method | against | T | target | measured | met |", "|---|---|---:|---:|---:|---|"]
    for device, method, ref, lengths, least in TARGETS:
        if device != record["device"]:
            continue
        for t in lengths:
            if (method, t) in tps and (ref, t) in tps:
                ratio = tps[method, t] / tps[ref, t]
                lines.append(f"| {method} | {ref} | {t:,} | ≥ {least:g}x | {ratio:.2f}x | {'yes' if ratio >= least else '**no**'} |")
            else:
                lines.append(f"| {method} | {ref} | {t:,} | ≥ {least:g}x | not measured | – |")
    return "\n".join(lines) + "\n"


def rewrite(page: Path) -> str:
    """The page with every marked table made anew from its record."""
    text = page.read_text()

    def fill(match: re.Match) -> str:
        record = json.loads((page.parent / match["path"]).read_text())
        return match.group(1) + (render if match["kind"] == "bench" else render_targets)(record) + match.group(5)

    return BLOCK.sub(fill, text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("page", type=Path)
    p.add_argument("--check", action="store_true", help="exit 1 if the page differs from its records")
    args = p.parse_args(argv)
    new = rewrite(args.page)
    if args.check:
        if new != args.page.read_text():
            print(f"{args.page}: its layer-bench tables differ from their records; run without --check", file=sys.stderr)
            return 1
        return 0
    args.page.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
