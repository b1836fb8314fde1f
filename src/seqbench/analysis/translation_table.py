"""Translation under one label-smoothing rule: the families' table over seeds, and what smoothing did.

    python src/train.py -m experiment=multi30k_label_smoothing                    # 0.1 for every family, 2 seeds
    python src/train.py -m experiment=multi30k_label_smoothing \\
        preset=multi30k/bahdanau,multi30k/transformer model.label_smoothing=0.0 seed=1   # the pair without
    python -m seqbench.analysis.translation_table <sweep dirs> --report experiments/figures/multi30k-label-smoothing

Issue 36 asks translation to give every family label smoothing or none, with one pair shown both ways:
before it, only the Transformer and T5 had it (and twice the epochs), so a gap between them and the
recurrent models mixed the architecture with the loss. Reads every job (`seqbench.report.read_local`:
metrics.json and the preset) and, from each job's saved config, the label smoothing it trained with
(`model.label_smoothing`), the epochs it was given and whether its vocabulary is the joint one (T5's: its
perplexity counts other tokens and is not comparable, marked †). Writes:

- one row per (family, label smoothing): test BLEU (sacreBLEU, detokenised) and tokenised BLEU as mean ±
  sd over seeds, the 95 % t-interval of the BLEU mean, with each seed's score; the test perplexity (the
  plain NLL: smoothing changes only the training loss); epochs trained of those given; training minutes of CPU and of wall clock;
- per label-smoothing value, the verdict by the frontier's rule (`seqbench.verdict.winner_or_tie`): a family
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
smoothing and seed stop the command (they would count as two seeds).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from seqbench.families import family_of
from seqbench.report import Run, read_local
from seqbench.saved_yaml import load_dict


@dataclass
class Job:
    family: str
    smoothing: float
    seed: int | None
    run: Run
    joint_vocab: bool
    epochs_given: int | None
    epochs_trained: int | None
    model: str | None = None            # the registry family of its model (the Bahdanau preset's GRU): its kind
    attention_layer: str | None = None  # a recurrent model's attention (`model.attention`: bahdanau, none)
    val_bleu: float | None = None       # its best validation BLEU (greedy): what a family is chosen on


def _history(job_dir: Path) -> tuple[int | None, float | None]:
    """From the run's CSV history: the epochs trained, 1 + the last epoch that ended (its `train/loss_epoch`
    rows; Lightning numbers epochs from 0, and logs the test with the epoch count after the last, which no
    epoch trained), and the best validation BLEU."""
    path = job_dir / "csv" / "metrics.csv"
    if not path.is_file():
        return None, None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    epochs = [int(float(r["epoch"])) for r in rows if r.get("epoch") and r.get("train/loss_epoch")]
    bleu = [float(r["val/bleu"]) for r in rows if r.get("val/bleu")]
    return (max(epochs) + 1 if epochs else None), (max(bleu) if bleu else None)


def _override(run: Run, key: str) -> str | None:
    """`key`'s value on the job's command line (`overrides`: a string in metrics.json, a list in the launcher's
    record of a job that failed before writing one)."""
    words = run.metrics.get("overrides") or ""
    words = words.split() if isinstance(words, str) else [str(w) for w in words]
    return next((w.split("=", 1)[1] for w in words if w.lstrip("+").startswith(f"{key}=")), None)


def job_of(run: Run) -> Job:
    """A job's family, smoothing and seed from its saved config; a failed job that left no folder, from its
    command line (the preset's family, the smoothing given, else the experiment's)."""
    config = load_dict(run.path / ".hydra" / "config.yaml") if run.path and (run.path / ".hydra").is_dir() else {}
    model, data, trainer = (config.get(k) or {} for k in ("model", "data", "trainer"))
    family, smoothing = run.family, model.get("label_smoothing")
    if not config:
        preset = _override(run, "preset")
        family = preset.rsplit("/", 1)[-1] if preset else run.family
        smoothing = _override(run, "model.label_smoothing")
    seed = run.seed or config.get("seed") or (int(_override(run, "seed")) if _override(run, "seed") else None)
    epochs, val_bleu = _history(run.path) if run.path else (None, None)
    return Job(family, float(smoothing or 0.0), seed, run, bool(data.get("joint_vocab")), trainer.get("max_epochs"),
               epochs, family_of(model) if model.get("_target_") else None,
               str(model["attention"]) if model.get("attention") is not None else None, val_bleu)


def check_unique(jobs: list[Job]) -> None:
    """Two completed runs of one family, smoothing and seed (a rerun, or one sweep given twice) would count
    as two seeds and make the pairing depend on the order of the folders: stop, naming them."""
    seen: dict[tuple, str] = {}
    for j in jobs:
        if j.run.failed:
            continue
        key = (j.family, j.smoothing, j.seed)
        if key in seen:
            raise SystemExit(f"{seen[key]} and {j.run.name} are both {j.family}, label smoothing {j.smoothing:g}, "
                             f"seed {j.seed}: give each run once")
        seen[key] = j.run.name


def _mean_sd(values: list[float]) -> str:
    if not values:
        return "–"
    sd = f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else ""
    return f"{statistics.fmean(values):.2f}{sd}"


def _interval_text(values: list[float]) -> str:
    from seqbench.verdict import t_interval

    if len(values) < 2:
        return "–" if not values else "none: 1 seed"
    i = t_interval(values)
    return f"[{i.low:.2f}, {i.high:.2f}]"


FAMILY_FIELDS = ("family", "label smoothing", "seeds", "test BLEU", "95 % interval", "per seed", "tokenised BLEU",
                 "best val BLEU", "test ppl", "epochs trained/given", "training CPU min", "training wall min")
BLEU_FIELDS = ("label_smoothing", "family", "model", "attention_layer", "kind", "seeds", "bleu_mean", "bleu_sd", "low",
               "high", "val_bleu_mean", "epochs_given", "epochs_trained", "verdict")
UNRANKED = "unranked"  # a verdict's prefix: the family has no interval to rank by


def _completed(jobs: list[Job]) -> dict[float, dict[str, list[Job]]]:
    """Completed jobs with a test BLEU by label smoothing (largest first), then family, in seed order."""
    by: dict[float, dict[str, list[Job]]] = {}
    for j in sorted(jobs, key=lambda j: (-j.smoothing, j.seed or 0)):
        if not j.run.failed and j.run.metrics.get("test/bleu") is not None:
            by.setdefault(j.smoothing, {}).setdefault(j.family, []).append(j)
    return by


def _not_ended(jobs) -> dict[str, list[Job]]:
    """By family, the jobs that have not ended well: running, or failed (their status, the launcher's record)."""
    by: dict[str, list[Job]] = {}
    for j in jobs:
        if j.run.failed:
            by.setdefault(j.family, []).append(j)
    return by


def _statuses(jobs: list[Job]) -> str:
    """`2 running`, `1 failed, 1 running`: what became of the jobs that have no score."""
    counts: dict[str, int] = {}
    for j in jobs:
        status = str(j.run.metrics.get("status") or "failed")
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def _joined(values) -> str:
    values = sorted({v for v in values if v is not None})
    return ";".join(str(v) for v in values)


def bleu_rows(jobs: list[Job]) -> list[dict]:
    """The record the findings read (`seqbench.findings.translation`): per label smoothing and family the seeds,
    the test BLEU mean, sd and 95 % interval as numbers, the mean best validation BLEU (what a family is chosen
    on: the test is the score), the epochs given and the fewest trained, and the family's place in that
    smoothing's verdict: `won`; `tie` (its interval overlaps the best mean's); `below` (its interval lies below
    the best mean's, whatever it does against the others of the tie); `alone` (the one ranked family);
    `unranked: one seed` or `unranked: identical seeds`, with the family's jobs that did not end with a test BLEU
    after a semicolon ("one seed; 1 running"), and a family none of whose jobs has ended a row of its own
    (`unranked: 2 running`, seeds 0): the findings say which families the verdict does not hold yet. `kind` is the registry's side of its model
    (`seqbench.findings.family_kind`): the Bahdanau, Luong and plain seq2seq presets are recurrent
    encoder-decoders (two with an attention layer, `attention_layer`), the Transformer and T5 attention
    throughout; a family of no known kind stops the command, since the headline would leave it out."""
    from seqbench.families import order
    from seqbench.findings import family_kind
    from seqbench.verdict import t_interval, winner_or_tie

    completed = _completed(jobs)
    rows = []
    for smoothing in sorted({j.smoothing for j in jobs}, reverse=True):
        families = completed.get(smoothing, {})
        others = _not_ended(j for j in jobs if j.smoothing == smoothing)
        bleu = {f: [j.run.metrics["test/bleu"] for j in js] for f, js in families.items()}
        intervals = {f: t_interval(v) for f, v in bleu.items()}
        ranked = {f: i for f, i in intervals.items() if i.n >= 2 and i.sd}
        winner, tied = winner_or_tie(ranked, higher_is_better=True)
        best = max(ranked, key=lambda f: ranked[f].mean) if ranked else None
        for f in order(set(families) | set(others)):
            pending = others.get(f, [])
            js, i = families.get(f, []), intervals.get(f)
            model = next((j.model for j in js + pending if j.model), None)
            kind = family_kind(model or f)
            if kind is None and not js and not model:
                continue  # jobs that failed before their configuration was written: no family to name (family_rows counts them)
            if kind is None:
                raise SystemExit(f"{f}: its model ({model or 'unknown'}) has no kind in the family registry "
                                 "(seqbench.families: recurrent or attention)")
            waiting = _statuses(pending)
            if i is None:
                rows.append({"label_smoothing": smoothing, "family": f, "model": model or "",
                             "attention_layer": next((j.attention_layer for j in pending if j.attention_layer), ""),
                             "kind": kind, "seeds": 0, "bleu_mean": "", "bleu_sd": "", "low": "", "high": "",
                             "val_bleu_mean": "", "epochs_given": _joined(j.epochs_given for j in pending),
                             "epochs_trained": "", "verdict": f"{UNRANKED}: {waiting}"})
                continue
            place = (f"{UNRANKED}: one seed" if i.n < 2 else f"{UNRANKED}: identical seeds" if not i.sd else
                     "alone" if len(ranked) < 2 else "won" if f == winner else "tie" if f in tied else "below")
            assert place != "below" or ranked[f].high < ranked[best].low
            if pending and place.startswith(UNRANKED):
                place += f"; {waiting}"
            val = [j.val_bleu for j in js if j.val_bleu is not None]
            trained = [j.epochs_trained for j in js if j.epochs_trained is not None]
            rows.append({"label_smoothing": smoothing, "family": f, "model": model or "",
                         "attention_layer": js[0].attention_layer or "", "kind": kind, "seeds": i.n,
                         "bleu_mean": i.mean, "bleu_sd": "" if i.sd is None else i.sd,
                         "low": "" if i.sd is None else i.low, "high": "" if i.sd is None else i.high,
                         "val_bleu_mean": statistics.fmean(val) if len(val) == len(js) else "",
                         "epochs_given": _joined(j.epochs_given for j in js),
                         "epochs_trained": min(trained) if len(trained) == len(js) else "", "verdict": place})
    return rows


def verdict_lines(rows: list[dict]) -> list[str]:
    """Per label-smoothing value run by two families or more, `bleu_rows`'s verdict in words: a paragraph each,
    starting "Verdict", which a page's table marker takes with `notes=Verdict` (`seqbench.pages`)."""
    by: dict[float, list[dict]] = {}
    for r in rows:
        by.setdefault(r["label_smoothing"], []).append(r)
    lines = []
    for smoothing, rs in by.items():
        if len(rs) < 2:
            continue
        place = {p: [r["family"] for r in rs if r["verdict"] == p] for p in ("won", "tie", "below", "alone")}
        unranked = [f"{r['family']} ({r['verdict'].split(': ', 1)[1]})" for r in rs if r["verdict"].startswith(UNRANKED)]
        ranked = [r for r in rs if not r["verdict"].startswith(UNRANKED)]
        if place["won"]:
            head = f"**{place['won'][0]} wins**: its interval lies above every other ranked family's"
        elif place["tie"]:
            best = max(ranked, key=lambda r: r["bleu_mean"])["family"]
            head = f"**tie ({', '.join(place['tie'])})**: each interval overlaps that of the best mean ({best})"
        else:
            head = "**no ranking**: fewer than two families have two seeds or more that differ" + (
                f" (ranked alone: {', '.join(place['alone'])})" if place["alone"] else "")
        notes = ([f"below the best mean's interval: {', '.join(place['below'])}"] if place["below"] else []) + \
                ([f"not ranked: {', '.join(unranked)}"] if unranked else [])
        lines.append(f"Verdict at label smoothing {smoothing:g}: {head}" + "".join(f"; {n}" for n in notes) + ".")
    return lines


def family_rows(jobs: list[Job]) -> list[dict]:
    from seqbench.families import order

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
        minutes = {key: [j.run.metrics[key] / 60 for j in done if j.run.metrics.get(key)]
                   for key in ("curve/train_cpu_s", "curve/train_time_s")}
        # a job restored from the sweep archive keeps its validation curve, not the epoch column
        epochs = sorted({f"{'?' if j.epochs_trained is None else j.epochs_trained}/{j.epochs_given}" for j in done})
        others = _statuses([j for j in js if j.run.failed])
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
            **{column: f"{statistics.fmean(minutes[key]):.0f}" if minutes[key] else "–"
               for column, key in (("training CPU min", "curve/train_cpu_s"), ("training wall min", "curve/train_time_s"))}})
    return rows


GAP_FIELDS = ("label_smoothing", "attention", "recurrent", "seeds", "sentences", "gap", "low", "high", "resamples")


def gap_rows(jobs: list[Job], bleu: list[dict]) -> list[dict]:
    """Per label smoothing, every attention family against every recurrent one: the gap of their mean test BLEU
    and its 95 % interval over paired draws of the test sentences (`bleu_bootstrap`), what the seeds' interval
    does not cover. A pair where a seed left no translations (a job restored from the archive) is left out;
    runs whose translations do not give their logged BLEU, or that scored other references, stop the command."""
    from seqbench.analysis.bleu_bootstrap import RESAMPLES, gap_interval, run_stats

    kinds = {(r["label_smoothing"], r["family"]): r["kind"] for r in bleu}
    completed = _completed(jobs)
    done = [j for families in completed.values() for js in families.values() for j in js]
    read = {id(j): run_stats(j.run.path, j.run.metrics["test/bleu"]) if j.run.path else None for j in done}
    references = {v[1]: j.run.name for j in done if (v := read[id(j)]) is not None}
    if len(references) > 1:
        raise SystemExit(f"the runs scored different references ({', '.join(sorted(references.values()))} differ): "
                         "no paired comparison")
    rows = []
    for smoothing, families in completed.items():
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
    from seqbench.families import order

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
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                     + ["| " + " | ".join(str(r[k]) for k in head) + " |" for r in rows])


def write_csv(path: Path, rows: list[dict], fields: tuple[str, ...]) -> None:
    """`rows` under a fixed header: a table with no row yet is a header, never an error."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> str:
    from seqbench.analysis.bleu_bootstrap import RESAMPLES
    from seqbench.ledger import write_record
    from seqbench.provenance import command_line

    parser = argparse.ArgumentParser(prog="python -m seqbench.analysis.translation_table",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="the translation sweeps' directories")
    parser.add_argument("--report", type=Path, help="write translation.md, translation.csv, bleu.csv and gaps.csv here")
    args = parser.parse_args(argv)
    started = time.time()
    jobs = [job_of(r) for r in read_local(args.dirs)]
    check_unique(jobs)
    families, bleu = family_rows(jobs), bleu_rows(jobs)
    gaps = gap_rows(jobs, bleu)
    text = ("## Every family, one label-smoothing rule\n\n" + markdown(families) + "\n\n"
            + "\n\n".join(verdict_lines(bleu) or ["Verdict: none yet, fewer than two families with a test BLEU."]) + "\n\n"
            "Test BLEU: sacreBLEU on detokenised output, beam 5, the best checkpoint by validation loss; mean ± sd "
            "over seeds, and the 95 % t-interval of the mean (two seeds give a wide one: t = 12.7). A family wins "
            "only where its interval lies above every other ranked family's, the frontier's rule (seqbench.verdict); "
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
                     command_line("seqbench.analysis.translation_table", argv or sys.argv[1:]), started)
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
