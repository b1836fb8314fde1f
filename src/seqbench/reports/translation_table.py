"""Translation under one label-smoothing rule: the families' table over seeds, and what smoothing did.

    python src/train.py -m experiment=multi30k_label_smoothing                    # 0.1 for every family, 2 seeds
    python src/train.py -m experiment=multi30k_label_smoothing \\
        preset=multi30k/bahdanau,multi30k/transformer model.label_smoothing=0.0 seed=1   # the pair without
    python -m seqbench.reports.translation_table <sweep dirs> --report experiments/figures/multi30k-label-smoothing

Issue 36 asks translation to give every family label smoothing or none, with one pair shown both ways:
before it, only the Transformer and T5 had it (and twice the epochs), so a gap between them and the
recurrent models mixed the architecture with the loss. Reads every job (`seqbench.training.record.read_runs`:
the record and the preset) and, from each job's saved config, the label smoothing it trained with
(`model.label_smoothing`), the epochs it was given and whether its vocabulary is the joint one (T5's: its
perplexity counts other tokens and is not comparable, marked †). Writes:

- one row per (family, label smoothing): test BLEU (sacreBLEU, detokenised) and tokenised BLEU as mean ±
  sd over seeds, the 95 % t-interval of the BLEU mean, with each seed's score; the test perplexity (the
  plain NLL: smoothing changes only the training loss); epochs trained of those given; training minutes of CPU and of wall clock;
- per label-smoothing value, the verdict by the frontier's rule (`seqbench.protocol.verdict.winner_or_tie`): a family
  wins only where its interval lies above every other ranked family's, else the families whose intervals
  overlap the best mean's tie. A family ranks with two seeds or more that differ: one seed has no interval,
  and identical scores an interval of width 0 that would let any gap "win" (a seed that never took effect);
- `bleu.csv`, the same numbers unformatted (each family's place in its verdict, its model, attention layer,
  kind, epochs and mean best validation BLEU), which the findings' headline reads;
- `gaps.csv`, per label smoothing every attention family against every recurrent one: the gap of their mean
  test BLEU and its 95 % interval over paired draws of the test sentences (`seqbench.analysis.bleu_bootstrap`),
  the test set's share of the uncertainty, which the seeds' interval leaves out;
- one row per family run both ways: BLEU with smoothing minus without, paired by seed (one seed gives both
  runs the same initialisation and data order), as the mean difference, its sd and the seeds it won.

A job that did not complete is counted by its status, never averaged; two completed runs of one family,
smoothing and seed stop the command (they would count as two seeds). The jobs are read by `translation_jobs`,
the verdict is `translation_verdict`'s; this module lays out the table and writes the record.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

from seqbench.analysis.bleu_bootstrap import RESAMPLES, gap_interval, run_stats
from seqbench.families import order
from seqbench.protocol.verdict import t_interval
from seqbench.provenance import command_line, write_record
from seqbench.reports.translation_jobs import Job, check_unique, completed, job_of, statuses
from seqbench.reports.translation_verdict import BLEU_FIELDS, bleu_rows, verdict_lines
from seqbench.tables import table
from seqbench.training.record import read_runs


def _mean_sd(values: list[float]) -> str:
    if not values:
        return "–"
    sd = f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else ""
    return f"{statistics.fmean(values):.2f}{sd}"


def _interval_text(values: list[float]) -> str:
    if len(values) < 2:
        return "–" if not values else "none: 1 seed"
    i = t_interval(values)
    return f"[{i.low:.2f}, {i.high:.2f}]"


COST_COLUMNS = {"training CPU min": "curve/train_cpu_s", "training wall min": "curve/train_time_s"}  # column: seconds logged
FAMILY_FIELDS = ("family", "label smoothing", "seeds", "test BLEU", "95 % interval", "per seed", "tokenised BLEU",
                 "best val BLEU", "test ppl", "epochs trained/given", *COST_COLUMNS)


def family_rows(jobs: list[Job]) -> list[dict]:
    rows = []
    groups: dict[tuple[str, float], list[Job]] = {}
    for j in jobs:
        groups.setdefault((j.family, j.smoothing), []).append(j)
    rank = {f: i for i, f in enumerate(order({f for f, _ in groups}))}
    for (family, smoothing), js in sorted(groups.items(), key=lambda kv: (rank[kv[0][0]], kv[0][1])):
        done = sorted((j for j in js if not j.run.failed), key=lambda j: j.seed or 0)
        bleu = [j.run.metrics["test/bleu"] for j in done if j.run.metrics.get("test/bleu") is not None]
        tok = [j.run.metrics["test/bleu_tok"] for j in done if j.run.metrics.get("test/bleu_tok") is not None]
        ppl = [j.run.metrics["test/ppl"] for j in done if j.run.metrics.get("test/ppl") is not None]
        minutes = {column: [j.run.metrics[key] / 60 for j in done if j.run.metrics.get(key)]
                   for column, key in COST_COLUMNS.items()}
        # a job restored from the sweep archive keeps its validation curve, not the epoch column
        epochs = sorted({f"{'?' if j.epochs_trained is None else j.epochs_trained}/{j.epochs_given}" for j in done})
        others = statuses([j for j in js if j.run.failed])
        rows.append({
            "family": family, "label smoothing": f"{smoothing:g}",
            "seeds": f"{len(done)}" + (f" ({others})" if others else ""),
            "test BLEU": _mean_sd(bleu),
            "95 % interval": _interval_text(bleu),
            "per seed": ", ".join(f"{j.seed}: {j.run.metrics['test/bleu']:.2f}" for j in done
                                  if j.run.metrics.get("test/bleu") is not None) or "–",
            "tokenised BLEU": _mean_sd(tok),
            "best val BLEU": _mean_sd([j.val_bleu for j in done if j.val_bleu is not None]),
            "test ppl": (f"{statistics.fmean(ppl):.2f}" + ("†" if any(j.joint_vocab for j in done) else "")) if ppl else "–",
            "epochs trained/given": ", ".join(epochs) or "–",
            **{column: f"{statistics.fmean(m):.0f}" if m else "–" for column, m in minutes.items()}})
    return rows


GAP_FIELDS = ("label_smoothing", "attention", "recurrent", "seeds", "sentences", "gap", "low", "high", "resamples")


def gap_rows(jobs: list[Job], bleu: list[dict]) -> list[dict]:
    """Per label smoothing, every attention family against every recurrent one: the gap of their mean test BLEU
    and its 95 % interval over paired draws of the test sentences (`bleu_bootstrap`), what the seeds' interval
    does not cover. A pair where a seed left no translations (a job restored from the archive) is left out;
    runs whose translations do not give their logged BLEU, or that scored other references, stop the command."""
    kinds = {(r["label_smoothing"], r["family"]): r["kind"] for r in bleu}
    by_smoothing = completed(jobs)
    done = [j for families in by_smoothing.values() for js in families.values() for j in js]
    read = {id(j): run_stats(j.run.path, j.run.metrics["test/bleu"]) if j.run.path else None for j in done}
    references = {v[1]: j.run.name for j in done if (v := read[id(j)]) is not None}
    if len(references) > 1:
        raise SystemExit(f"the runs scored different references ({', '.join(sorted(references.values()))} differ): "
                         "no paired comparison")
    rows = []
    for smoothing, families in by_smoothing.items():
        stats = {f: [read[id(j)] for j in js] for f, js in families.items()}
        side = lambda kind: [f for f in families if kinds[smoothing, f] == kind and all(v is not None for v in stats[f])]  # noqa: E731
        for a in side("attention"):
            for r in side("recurrent"):
                gap, low, high = gap_interval([v[0] for v in stats[a]], [v[0] for v in stats[r]])
                rows.append({"label_smoothing": smoothing, "attention": a, "recurrent": r,
                             "seeds": f"{len(stats[a])}, {len(stats[r])}", "sentences": len(stats[a][0][0]),
                             "gap": gap, "low": low, "high": high, "resamples": RESAMPLES})
    return rows


def smoothing_rows(jobs: list[Job]) -> list[dict]:
    """Per family run with and without smoothing: BLEU with minus without, paired by seed."""
    by: dict[str, dict[float, dict[int, float]]] = {}
    for j in jobs:
        if not j.run.failed and j.run.metrics.get("test/bleu") is not None:
            by.setdefault(j.family, {}).setdefault(j.smoothing, {})[j.seed] = j.run.metrics["test/bleu"]
    rows = []
    for family in order(by):
        without, rest = by[family].get(0.0, {}), {s: v for s, v in by[family].items() if s > 0}
        for smoothing, with_ in sorted(rest.items()):
            seeds = sorted(set(without) & set(with_))
            if not seeds:
                continue
            diffs = [with_[s] - without[s] for s in seeds]
            rows.append({"family": family, "label smoothing": f"{smoothing:g}", "seeds paired": len(seeds),
                         "BLEU without": _mean_sd([without[s] for s in seeds]),
                         "BLEU with": _mean_sd([with_[s] for s in seeds]),
                         "with − without": f"{statistics.fmean(diffs):+.2f}"
                                           + (f" ± {statistics.stdev(diffs):.2f}" if len(diffs) > 1 else ""),
                         "seeds won by smoothing": f"{sum(d > 0 for d in diffs)} of {len(diffs)}"})
    return rows


def markdown(rows: list[dict]) -> str:
    if not rows:
        return "(none)"
    head = list(rows[0])
    return table(head, ([r[k] for k in head] for r in rows))


def write_csv(path: Path, rows: list[dict], fields: tuple[str, ...]) -> None:
    """`rows` under a fixed header: a table with no row yet is a header, never an error."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m seqbench.reports.translation_table",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="the translation sweeps' directories")
    parser.add_argument("--report", type=Path, help="write translation.md, translation.csv, bleu.csv and gaps.csv here")
    args = parser.parse_args(argv)
    started = time.time()
    jobs = [job_of(r) for r in read_runs(args.dirs)]
    check_unique(jobs)
    families, bleu = family_rows(jobs), bleu_rows(jobs)
    gaps = gap_rows(jobs, bleu)
    text = ("## Every family, one label-smoothing rule\n\n" + markdown(families) + "\n\n"
            + "\n\n".join(verdict_lines(bleu) or ["Verdict: none yet, fewer than two families with a test BLEU."]) + "\n\n"
            "Test BLEU: sacreBLEU on detokenised output, beam 5, the best checkpoint by validation loss; mean ± sd "
            "over seeds, and the 95 % t-interval of the mean (two seeds give a wide one: t = 12.7). A family wins "
            "only where its interval lies above every other ranked family's, the frontier's rule (seqbench.protocol.verdict); "
            "a family ranks with two seeds or more that differ. Best val BLEU: each seed's best greedy validation "
            "BLEU, what the findings choose a kind's family on (the test BLEU is the score). Test ppl: per English BPE token of the run's vocabulary, the plain NLL; † a joint "
            "vocabulary (T5's), not comparable with the others. Training minutes, mean over seeds: the training steps' CPU time (one thread a job: the cost, which a pause or a "
            "neighbouring job does not change) and their wall clock (which the other job on the machine and a sweep paused "
            "for the test suite lengthen); a resumed run's segments summed.\n\n"
            "## The test sentences' share: a paired bootstrap of each attention-recurrent gap\n\n"
            + markdown([{"label smoothing": f"{g['label_smoothing']:g}", "attention": g["attention"],
                         "recurrent": g["recurrent"], "seeds": g["seeds"], "BLEU gap": f"{g['gap']:+.2f}",
                         "95 % over test-sentence draws": f"[{g['low']:+.2f}, {g['high']:+.2f}]"} for g in gaps]) + "\n\n"
            "Attention's mean test BLEU over its seeds minus recurrence's, and the 2.5 and 97.5 percentiles of that gap "
            f"over {RESAMPLES} draws of the test sentences with replacement, the same draw for both (Koehn 2004): how "
            "much another test set of this kind could move the gap, which the seeds' interval above does not say.\n\n"
            "## Label smoothing both ways\n\n" + markdown(smoothing_rows(jobs)) + "\n\n"
            "Paired by seed: the same seed gives both runs the same initialisation and data order.")
    print(text)
    if args.report:
        args.report.mkdir(parents=True, exist_ok=True)
        (args.report / "translation.md").write_text(f"# Translation under one label-smoothing rule\n\n{text}\n",
                                                    encoding="utf-8")
        write_csv(args.report / "translation.csv", families, FAMILY_FIELDS)
        write_csv(args.report / "bleu.csv", bleu, BLEU_FIELDS)
        write_csv(args.report / "gaps.csv", gaps, GAP_FIELDS)
        write_record(args.report, ["translation.md", "translation.csv", "bleu.csv", "gaps.csv"],
                     command_line("seqbench.reports.translation_table", argv or sys.argv[1:]), started)
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
