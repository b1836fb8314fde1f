"""Claim 1: attention trains faster than recurrence because it parallelises over time.

Read from the whole-model throughput benchmarks (`seqbench.analysis.bench`, one training step of each PTB
preset against T) on the CPU and on the H100: at each T, the fastest attention row's training
tokens/s over the fastest recurrent row's, at the largest batch each record measured (the batch
closest to training). "Faster" needs a ratio above the noise of such ratios, which the ledger
measures itself: two CPU layer benchmarks of the same comparison (the flash attention sublayer
against the fused LSTM, `figures/parallel-recurrences/layer_bench_cpu_*.json`) minutes apart
disagree by that much. The claim's "because it parallelises" is checked too: parallelism over
positions shows as a ratio that grows with T; a device where attention is ahead at short T only
and falls behind at long T is not winning by parallelism.
"""

from __future__ import annotations

from seqbench.families import kind_of
from seqbench.reports.findings.claim import DOES_NOT_HOLD, HOLDS, HOLDS_ONLY, Claim, conditions_of
from seqbench.tables import table_lines

BENCHES = {"the 2-core CPU": "experiments/figures/throughput/bench_cpu.csv",
           "one H100": "experiments/records/2026-11-26-h100/bench_cuda.csv"}
FIGURES = ["experiments/figures/throughput/bench_cpu.png", "experiments/records/2026-11-26-h100/bench_cuda.png"]


NOISE_METHOD = "attention_flash"  # the kernel of the benchmark's fastest attention rows (dropout 0)


def noise(ledger) -> tuple[float, str]:
    """The largest relative difference of the flash attention / fused LSTM ratio (same T) between the
    repeated CPU layer benchmarks: the spread a ratio must exceed to mean something."""
    runs = sorted(p.relative_to(ledger.root).as_posix()
                  for p in (ledger.root / "experiments/figures/parallel-recurrences").glob("layer_bench_cpu_*.json"))
    ratios: dict[tuple, list[float]] = {}
    for path in runs:
        for row in ledger.json(path)["results"]:
            if row.get("status") == "ok" and row["method"] == NOISE_METHOD:
                ratios.setdefault((row["method"], row["T"]), []).append(row["ratio_vs_lstm_fused"])
    spread = max(max(v) / min(v) for v in ratios.values() if len(v) > 1)
    return spread, runs[-1]


def ratios(ledger, path: str) -> tuple[int, list[tuple[int, float, str, str, float, float]]]:
    """At the record's largest batch: per T, (T, ratio, fastest attention, fastest recurrent, their tokens/s)."""
    rows = [r for r in ledger.rows(path) if r["status"] == "ok"]
    batch = max(int(r["batch"]) for r in rows)
    out = []
    for t in sorted({int(r["length"]) for r in rows if int(r["batch"]) == batch}):
        best = {}
        for r in rows:
            kind = kind_of(r["family"])
            if int(r["batch"]) == batch and int(r["length"]) == t and kind:
                if kind not in best or float(r["tokens_per_s"]) > float(best[kind]["tokens_per_s"]):
                    best[kind] = r
        if len(best) == 2:
            a, rec = float(best["attention"]["tokens_per_s"]), float(best["recurrent"]["tokens_per_s"])
            out.append((t, a / rec, best["attention"]["family"], best["recurrent"]["family"], a, rec))
    return batch, out


def sizes(ledger) -> str:
    """The benchmarked models' non-embedding parameters, smallest to largest, linked."""
    found = [(int(r["params_non_embedding"]), path) for path in BENCHES.values() for r in ledger.rows(path)
             if r.get("params_non_embedding")]
    (lo, lo_path), (hi, hi_path) = min(found), max(found)
    return f"{ledger.number(lo, lo_path, '{:,}').md()}–{ledger.number(hi, hi_path, '{:,}').md()}"


def claim(ledger) -> Claim:
    margin, noise_path = noise(ledger)
    answer, faster, longest = [], {}, None
    for device, path in BENCHES.items():
        batch, rows = ratios(ledger, path)
        link = lambda v, fmt="{:.2f}x", path=path: ledger.number(v, path, fmt).md()  # noqa: E731
        answer += [f"**{device}**, batch {batch}, training tokens/s of the fastest attention and the fastest "
                   f"recurrent model at each T:", "",
                   *table_lines(["T", "attention", "tokens/s", "recurrent", "tokens/s", "attention / recurrent"],
                                ([f"{t:,}", a.split("/")[-1], link(ta, "{:,.0f}"), c.split("/")[-1], link(tc, "{:,.0f}"),
                                  link(r)] for t, r, a, c, ta, tc in rows), align="rlrlrr")]
        above = [t for t, r, *_ in rows if r > margin]
        grows = rows[-1][1] > rows[0][1]
        # three decimals where the two-decimal table would show a ratio equal to the bound it exceeds
        exceeds = ", ".join(f"T = {t:,} ({link(r, '{:.3f}x')})" for t, r, *_ in rows if r > margin) or "no T"
        answer.append(f"\nThe ratio {'grows' if grows else 'falls'} from the shortest to the longest T; it exceeds "
                      f"the noise bound ({ledger.number(margin, noise_path, '{:.3f}x').md()}) at {exceeds}.\n")
        faster[device] = (above, len(rows), grows and rows[-1][1] > margin)
        longest = ledger.number(rows[-1][1], path, "{:.1f}x")  # the last device's ratio at its longest T
    by_parallelism = [d for d, (_, _, ok) in faster.items() if ok]
    if not by_parallelism:
        verdict = DOES_NOT_HOLD
    elif all(ok and len(above) == n for above, n, ok in faster.values()):
        verdict = HOLDS
    else:
        verdict = f"{HOLDS_ONLY} on " + " and ".join(f"{d} at T ≥ {min(faster[d][0])}" for d in by_parallelism)
    spread = ledger.number(margin, noise_path, "{:.2f}x")
    return Claim(
        key="speed", claim="Attention trains faster than recurrence because it parallelises over time.",
        verdict=verdict, answer=answer,
        conditions=[f"The PTB presets ({sizes(ledger)} non-embedding parameters, PTB's vocabulary), one training step "
                    "(forward, loss, backward) per case; the attention rows include the flash-kernel variants."]
                   + conditions_of(ledger, *BENCHES.values()),
        figures=FIGURES,
        confidence=f"One measurement per case (a median of repeats). A ratio counts as faster only above "
                   f"{spread.md()}, the disagreement of the flash-attention / fused-LSTM ratio between two CPU "
                   f"layer benchmarks of the same cases minutes apart: one layer, one thread, one CPU, applied as a "
                   f"convention to the whole-model benchmarks of both devices, not a measurement of their noise.",
        would_change="Whole-model training to a target loss on the GPU (the frontier's GPU tier, not run): the "
                     "benchmark times a step, not the steps a family needs.",
        number=longest, number_label=f"attention / recurrent training tokens/s, {list(BENCHES)[-1]}, longest T")
