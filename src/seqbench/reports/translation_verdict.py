"""The translation verdict per label-smoothing rule, as `bleu.csv` records it and the findings read it.

The frontier's rule (`seqbench.protocol.verdict.winner_or_tie`): a family wins only where its 95 % t-interval of the
test BLEU mean lies above every other ranked family's, else the families whose intervals overlap the best
mean's tie. A family ranks with two seeds or more that differ: one seed has no interval, and identical scores
an interval of width 0 that would let any gap "win" (a seed that never took effect). A family none of whose
jobs has ended is named with what its jobs are doing, so that the findings never rank a table silently short
of a family (`seqbench.reports.findings.translation`).
"""

from __future__ import annotations

import statistics

from seqbench.families import kind_of, order
from seqbench.protocol.verdict import t_interval, winner_or_tie
from seqbench.reports.translation_jobs import Job, completed, not_ended, statuses

BLEU_FIELDS = ("label_smoothing", "family", "model", "attention_layer", "kind", "seeds", "bleu_mean", "bleu_sd", "low",
               "high", "val_bleu_mean", "epochs_given", "epochs_trained", "verdict")
UNRANKED = "unranked"  # a verdict's prefix: the family has no interval to rank by


def _joined(values) -> str:
    """The distinct values, sorted, as one CSV cell: `10`, or `10;20` where a family's seeds were given different epochs."""
    values = sorted({v for v in values if v is not None})
    return ";".join(str(v) for v in values)


def bleu_rows(jobs: list[Job]) -> list[dict]:
    """The record the findings read (`seqbench.reports.findings.translation`): per label smoothing and family the seeds,
    the test BLEU mean, sd and 95 % interval as numbers, the mean best validation BLEU (what a family is chosen
    on: the test is the score), the epochs given and the fewest trained, and the family's place in that
    smoothing's verdict: `won`; `tie` (its interval overlaps the best mean's); `below` (its interval lies below
    the best mean's, whatever it does against the others of the tie); `alone` (the one ranked family);
    `unranked: one seed` or `unranked: identical seeds`, with the family's jobs that did not end with a test BLEU
    after a semicolon ("one seed; 1 running"), and a family none of whose jobs has ended a row of its own
    (`unranked: 2 running`, seeds 0): the findings say which families the verdict does not hold yet. `kind` is the registry's side of its model
    (`seqbench.families.kind_of`): the Bahdanau, Luong and plain seq2seq presets are recurrent
    encoder-decoders (two with an attention layer, `attention_layer`), the Transformer and T5 attention
    throughout; a family of no known kind stops the command, since the headline would leave it out."""
    by_smoothing = completed(jobs)
    rows = []
    for smoothing in sorted({j.smoothing for j in jobs}, reverse=True):
        families = by_smoothing.get(smoothing, {})
        others = not_ended(j for j in jobs if j.smoothing == smoothing)
        bleu = {f: [j.run.metrics["test/bleu"] for j in js] for f, js in families.items()}
        intervals = {f: t_interval(v) for f, v in bleu.items()}
        ranked = {f: i for f, i in intervals.items() if i.n >= 2 and i.sd}
        winner, tied = winner_or_tie(ranked, higher_is_better=True)
        best = max(ranked, key=lambda f: ranked[f].mean) if ranked else None
        for f in order(set(families) | set(others)):
            pending = others.get(f, [])
            js, i = families.get(f, []), intervals.get(f)
            model = next((j.model for j in js + pending if j.model), None)
            kind = kind_of(model or f)
            if kind is None and not js and not model:
                continue  # jobs that failed before their configuration was written: no family to name (family_rows counts them)
            if kind is None:
                raise SystemExit(f"{f}: its model ({model or 'unknown'}) has no kind in the family registry "
                                 "(seqbench.families: recurrent or attention)")
            waiting = statuses(pending)
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
    starting "Verdict", which a page's table marker takes with `notes=Verdict` (`seqbench.reports.pages`)."""
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
