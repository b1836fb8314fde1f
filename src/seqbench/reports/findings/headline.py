"""Claim 5, the headline: Transformers surpass recurrent networks on language tasks.

Read from the compute-efficient frontier of both corpora (the lower envelope of `seqbench.reports.report`'s frontier table in
`figures/frontier-<corpus>/report.md`): at each FLOPs budget, the best attention family's validation
loss against the best recurrent family's. Attention "surpasses" at a budget when it is lower and,
where both entries have seeds enough for an interval (`seqbench.protocol.verdict.interval_of`), the
intervals do not overlap; a one-seed entry has no interval, which the confidence says.

Whether the families were tuned equally is read from the records, not asserted. Where the frontier after
tuning has a record (`seqbench.reports.frontier_tuned`'s `verdict.csv`: every family tuned by the same search, each
cell's score on held-out data over its seeds), the corpus is read from it; otherwise from the untuned
frontier report, whose command does not run the equal-budget search `experiment=tune_frontier*` (issue
36), so the verdict says "before equal tuning". A tuned record whose cells do not all have three seeds
yet says so in the verdict ("partial").

Translation, where every family trained under one label-smoothing rule, is read beside the frontier
(`seqbench.reports.findings.translation`): where attention's BLEU interval lies above recurrence's, the verdict says
it holds there too (and, where it holds nowhere else, the README's number is translation's BLEU lead); where it
does not, the detail says so.
"""

from __future__ import annotations

from pathlib import Path

from seqbench.families import kind_of
from seqbench.protocol.final_cells import (  # a cell's seeds (3); a record's `seeds_planned` says where it plans fewer
    SEEDS,
    Experiment,
)
from seqbench.protocol.verdict import interval_of
from seqbench.reports.findings import translation, unseen_text
from seqbench.reports.findings.claim import DOES_NOT_HOLD, HOLDS, HOLDS_ONLY, Claim, conditions_of
from seqbench.reports.frontier_join import frontier_table, join
from seqbench.tables import table_lines
from seqbench.training.record import METRICS

CORPORA = {"Tiny Shakespeare": "experiments/figures/frontier-shakespeare/report.md",
           "PTB": "experiments/figures/frontier-ptb/report.md"}
# families that joined the comparison later ran the same frontier sweep into reports of their own
# (issue 35's parallel recurrences); their envelope cells join the first report's rows by budget
LATER = {"Tiny Shakespeare": ["experiments/figures/frontier-shakespeare-parallel/report.md"],
         "PTB": ["experiments/figures/frontier-ptb-parallel/report.md"]}
# the frontier after tuning (`python -m seqbench.reports.frontier_tuned ... --report <folder>`): read instead where recorded
AFTER_TUNING = {"Tiny Shakespeare": "experiments/figures/frontier-after-tuning-shakespeare/verdict.csv",
                "PTB": "experiments/figures/frontier-after-tuning-ptb/verdict.csv"}
# each corpus's tuned frontier (`final_cells.Experiment`): its tiers; a budget above them is the tier beyond
EXPERIMENTS = {"Tiny Shakespeare": "tune_frontier", "PTB": "tune_frontier_ptb"}
TUNED = "experiment=tune_frontier"  # the equal-budget search's experiments (tune_frontier, tune_frontier_ptb)
GPU_RUNS = {"medium": f"experiments/records/2026-11-26-h100/zaremba_medium/{METRICS}",
            "large": f"experiments/records/2026-11-26-h100/zaremba_large/{METRICS}"}


def seed_spread(text: str) -> tuple[float, str] | None:
    """The largest seed sd of a validation loss in the report's per-configuration table, from its
    "valid ppl mean ± sd" over ≥ 2 seeds: sd(log ppl) ≈ sd(ppl) / ppl (the delta method). The frontier
    table's one-seed entries have no spread of their own; this is the spread seeds showed beside them."""
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("| family |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    col = header.index("valid ppl")
    found = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break  # the end of the per-configuration table
        cells = [c.strip() for c in line.strip("|").split("|")]
        if "±" in cells[col]:
            mean, sd = (float(x.replace(",", "")) for x in cells[col].split("±"))
            found.append((sd / mean, cells[0]))
    return max(found) if found else None


def joined_rows(ledger, corpus: str) -> list[dict]:
    """The corpus's frontier rows (each report's lower envelope, read by `seqbench.reports.frontier_join`,
    the parser the pages use too) with the later reports' families added at the same budgets; every
    cell keeps the report it came from (`source`), so its number links there."""
    tables = []
    for path in [CORPORA[corpus], *LATER.get(corpus, [])]:
        if path != CORPORA[corpus] and not ledger.has(path):
            continue  # not run (yet): the page lists the corpus's first report alone
        table = frontier_table(ledger.text(path))
        for cells in table.values():
            for family, c in cells.items():
                cells[family] = {"mean": c["loss"], "sd": c["sd"], "n": c["n"], "size": c["size"], "source": path}
        tables.append(table)
    return [{"budget": budget, "cells": cells} for budget, cells in sorted(join(tables).items())]


def tuned_rows(ledger, corpus: str) -> list[dict] | None:
    """The corpus's frontier after tuning, as `joined_rows` gives the untuned one: per budget each family's
    chosen cell (its held-out score over seeds); None where the record is not there or holds no cell."""
    path = AFTER_TUNING[corpus]
    if not ledger.has(path):
        return None
    by_budget: dict[float, dict] = {}
    for row in ledger.rows(path):
        size = f"{int(row['params_non_embedding']) / 1e6:.2g}M"
        by_budget.setdefault(float(row["budget"]), {})[row["family"]] = {
            "mean": float(row["score_mean"]), "sd": float(row["score_sd"]) if row["score_sd"] else None,
            "n": int(row["seeds"]), "source": path,
            # the seeds the protocol plans for the cell (`final_cells.planned_seeds`; records before the column: three)
            "planned": int(row.get("seeds_planned") or SEEDS),
            # a cell whose runs had no test scores its selection loss again: said beside its number
            "size": size if row["held_out"] == "True" else f"{size}, no held-out score"}
    return [{"budget": budget, "cells": cells} for budget, cells in sorted(by_budget.items())] or None


def _budget(b: float) -> str:
    return f"{b:.0e}".replace("e+", "e")


def best(cells: dict, kind: str) -> tuple[str, dict] | None:
    fams = [(f, c) for f, c in cells.items() if kind_of(f) == kind]
    return min(fams, key=lambda fc: fc[1]["mean"]) if fams else None


def claim(ledger) -> Claim:
    answer = ["Loss (nats per token) of each kind's best family at each budget (non-embedding parameters and "
              "seeds in brackets): after tuning, the held-out score of each family's chosen cell, mean over its "
              "seeds (`figures/frontier-after-tuning-<corpus>/verdict.csv`); before, the validation loss of the "
              "frontier table's lower envelope.", ""]
    table = []  # one row per corpus and budget tier
    wins, leads, tiers, untuned, spreads, ties, untested = [], [], 0, [], [], [], []
    overlap: set[str] = set()  # the leads whose intervals overlap (the others: one seed, within the seed sd)
    number_overlap = False
    number, closest, number_untested = None, None, False
    read, full, cells_read, compared, single = [], 0, 0, 0, 0
    fewer: dict[float, int] = {}  # a tier whose cells the protocol gives fewer seeds (the tier beyond): how many
    beyond_read: list[str] = []  # the corpora whose record has the tier beyond
    for corpus, first in CORPORA.items():
        rows = tuned_rows(ledger, corpus)
        rows_by_interval = rows is not None  # a tuned record: one-seed cells are "not yet tested", never a win
        if rows is None:
            path = first
            if TUNED not in ledger.record_of(path).command:
                untuned.append(corpus)
            spread = seed_spread(ledger.text(path))
            rows = joined_rows(ledger, corpus)
        else:
            path = AFTER_TUNING[corpus]
            sds = [(c["sd"], f"{f} {c['size']} @ {_budget(r['budget'])}") for r in rows for f, c in r["cells"].items()
                   if c["sd"] is not None]
            spread = max(sds) if sds else None
            cells_read += sum(len(r["cells"]) for r in rows)
            full += sum(c["n"] >= c["planned"] for r in rows for c in r["cells"].values())
            fewer |= {r["budget"]: c["planned"] for r in rows for c in r["cells"].values() if c["planned"] < SEEDS}
            # the tier beyond by its budget, above the frontier's tiers (it plans as many seeds as they do now)
            beyond_read += [corpus] if rows[-1]["budget"] > max(Experiment(EXPERIMENTS[corpus]).tiers()) else []
        read.append(path)
        if spread:
            spreads.append(f"{ledger.number(spread[0], path).md()} ({corpus}, {spread[1]})")
        noise = spread[0] if spread else None
        for row in rows:
            a, r = best(row["cells"], "attention"), best(row["cells"], "recurrent")
            if not (a and r):  # a tier the record has begun: say which kind it lacks so far
                missing = "attention" if not a else "recurrent"
                cell = (lambda f, c: f"{f} {ledger.number(c['mean'], c['source'], '{:.3f}').md()} ({c['size']}, n={c['n']})")  # noqa: E731
                shown = [cell(*x) if x else "–" for x in (a, r)]
                table.append([corpus, _budget(row["budget"]), shown[0], shown[1], "–", f"no {missing} cell yet"])
                continue
            tiers += 1
            compared, single = compared + 2, single + (a[1]["n"] == 1) + (r[1]["n"] == 1)
            gap = r[1]["mean"] - a[1]["mean"]
            ia, ir = (interval_of(c["mean"], c["sd"], c["n"]) for c in (a[1], r[1]))
            separated = ia.high < ir.low if gap > 0 else ir.high < ia.low
            not_yet = rows_by_interval and (ia.sd is None or ir.sd is None)  # a tuned cell at one seed so far
            if ia.sd is not None and ir.sd is not None:
                check, clear = ("intervals apart", True) if separated else ("intervals overlap", False)
            elif not_yet:  # the protocol's rule: a winner only where the intervals lie apart
                clear, check = False, "one seed so far; no interval yet"
            elif noise is None:  # one seed, and no cell of the record has two: nothing to read the gap against
                clear, check = False, "one seed; no seed sd to read the gap against"
            else:  # one seed: the gap against the largest seed sd the corpus's record shows
                clear = abs(gap) > noise
                check = f"one seed; the gap is {'beyond' if clear else 'within'} the seed sd"
            link = lambda v, fmt="{:.3f}", path=path: ledger.number(v, path, fmt).md()  # noqa: E731
            cell = lambda f, c: f"{f} {ledger.number(c['mean'], c['source'], '{:.3f}').md()} ({c['size']}, n={c['n']})"  # noqa: E731
            table.append([corpus, _budget(row["budget"]), cell(*a), cell(*r), link(gap, "{:+.3f}"), check])
            if gap > 0:
                where = f"{corpus} at {_budget(row['budget'])} FLOPs"
                (wins if clear else untested if not_yet else leads).append(where)
                # why a lead is no win: intervals that overlap (seeds enough for them), or a one-seed gap within
                # the seed sd
                overlap |= {where} if where in leads and ia.sd is not None and ir.sd is not None else set()
                if number is None:
                    number, number_untested = ledger.number(gap, path, "{:+.3f}"), where in untested
                    number_overlap = where in overlap
            else:
                tie = ia.sd is not None and ir.sd is not None and not clear  # recurrence lower, within the intervals
                closest = max(closest or (gap, path, tie), (gap, path, tie))
                if tie:
                    ties.append(f"{corpus} at {_budget(row['budget'])} FLOPs")
    answer += table_lines(["corpus", "budget (FLOPs)", "best attention", "best recurrent", "recurrent − attention",
                           "interval check"], table, align="lrllrl")
    tuned = [c for c in CORPORA if c not in untuned and AFTER_TUNING[c] in read]
    beyond = "".join(f", {n} at {_budget(b)}" for b, n in sorted(fewer.items()))
    # "3 seeds", or where a tier plans fewer (the tier beyond planned 2 until 2026-12-06) "their planned seeds (3, 2 at 1e14)"
    plan = f"their planned seeds ({SEEDS}{beyond})" if fewer else f"{SEEDS} seeds"
    without_beyond = [c for c in CORPORA if c not in beyond_read]
    partial = f"after equal tuning, partial: {full} of {cells_read} cells with {plan}" if full < cells_read else ""
    before = f" ({'; '.join(x for x in ('before equal tuning' if untuned else '', partial) if x)})" if untuned or partial else ""
    detail = (f"The {' and '.join(untuned)} records ran each family's own recipe, not the equal-budget search "
              f"`{TUNED}`. " if untuned else "")
    if tuned:
        detail += (f"{' and '.join(tuned)}: every family tuned by the same search and scored on held-out data"
                   + (f"; until every cell has {plan}, a row whose cells have fewer is no ranking. " if partial else ". "))
    mt = translation.reading(ledger)
    mt_won = mt is not None and mt.winner == "attention"
    if not wins:
        verdict = (f"{HOLDS_ONLY} in {translation.WHERE}; not in language modelling{before}" if mt_won
                   else DOES_NOT_HOLD + before)
        why_not = [f"{w} ({'the intervals overlap' if w in overlap else 'by less than the seed sd'})" for w in leads]
        detail += ((f"Attention is lower only on {', '.join(why_not)}: no win. At every other budget of both corpora "
                    "where both kinds have a cell, a" if leads else
                    "A recurrent family is lower than every attention family at every budget of both corpora where both kinds")
                   + (" recurrent family is lower than every attention family" if leads else
                      (" have a cell with an interval" if untested else " have a cell"))
                   + (f"; on {', '.join(ties)} the intervals overlap: a tie, not a win for either kind." if ties else "."))
        detail += (f" At one seed so far, attention is lower on {', '.join(untested)}: no interval yet, so no ranking."
                   if untested else "")
    elif len(wins) == tiers:
        verdict = (HOLDS if mt is None or mt_won else f"{HOLDS_ONLY} in language modelling") + before
    else:
        verdict = (f"{HOLDS_ONLY} on {', '.join(wins)} ({len(wins)} of {tiers} budget tiers){before}"
                   f"{' and in ' + translation.WHERE if mt_won else ''}")
        # where it holds, and what the other tiers show: a win at one tier is no answer for the others
        why_not = [f"{w} ({'the intervals overlap' if w in overlap else 'by less than the seed sd'})" for w in leads]
        detail += (f"Attention is lower, with the intervals apart, on {', '.join(wins)}"
                   + (f"; it is lower on {', '.join(why_not)}: no win there" if leads else "")
                   + ". At every other budget of both corpora where both kinds have a cell, a recurrent family is lower "
                     "than every attention family"
                   + (f"; on {', '.join(ties)} the intervals overlap: a tie, not a win for either kind." if ties else "."))
        detail += (f" At one seed so far, attention is lower on {', '.join(untested)}: no interval yet, so no ranking."
                   if untested else "")
    top = max(Experiment("tune_frontier").tiers())  # Tiny Shakespeare's frontier: the tier beyond lies above it
    if "Tiny Shakespeare" in tuned and (why := unseen_text.sentence(ledger, top)):
        detail += " " + why  # what the tier beyond measures there, from the loss along the text
    if mt is not None:
        detail += " " + translation.sentence(mt)
        answer += translation.answer(ledger, mt)
    return Claim(
        key="headline", claim="Transformers surpass recurrent networks on language tasks.",
        verdict=verdict, detail=detail, answer=answer,
        conditions=([f"{' and '.join(tuned)}: each family at three sizes, tuned by one search (learning rate and tokens "
                     "per step, the same trials for every family) and trained at each tier with its setting there, on "
                     "the 2-core CPU; sizes chosen on validation (Tiny Shakespeare: the validation tenth's first half), "
                     "the score on data selection never saw (PTB's test split; the tenth's second half)."] if tuned else [])
                   + ([f"{' and '.join(untuned)}: each family at three sizes with its own recipe, trained to each FLOPs "
                       "budget on the 2-core CPU; losses on the validation split (Tiny Shakespeare's validation is also "
                       "its test split)."] if untuned else [])
                   + ([f"{translation.WHERE}: every family {mt.epochs} epochs of its own recipe with label smoothing "
                       f"{translation.RULE:g}; each kind's family chosen on its mean best validation BLEU (greedy), "
                       "scored by beam search on test2016 (sacreBLEU, detokenised)."] if mt else [])
                   + conditions_of(ledger, *read, *([translation.RECORD] if mt else [])),
        figures=[str(Path(p).parent / "loss_vs_flops.png") for p in read],
        confidence=f"{single} of the {compared} entries compared are one seed (n=1), which has no interval. Where the "
                   f"records have two seeds or more, the largest seed sd of a loss is {' and '.join(spreads) or 'not measured'}"
                   f"{' (in an untuned report, from the perplexity' + chr(39) + 's sd)' if untuned else ''}: a gap smaller "
                   "than that between one-seed entries is not a ranking."
                   + (" " + translation.confidence(mt) if mt else ""),
        would_change=("The equal-budget search for every family (`experiment=tune_frontier`, `tune_frontier_ptb`: "
                      "issue 36) with ≥ 3 seeds per cell and a held-out score; " if untuned else
                      f"The remaining seeds ({SEEDS} per cell{beyond}); " if partial else "")
                     + (translation.would_change(mt) if mt else "")
                     + (f"the 1e14 tier{'' if without_beyond == list(CORPORA) else ' on ' + ' and '.join(without_beyond)}; "
                        if without_beyond else "") + "the GPU tier, toward the compute where Kaplan et al. (2020) place the crossover.",
        number=(ledger.number(translation.gap(mt), translation.RECORD, "{:+.2f}") if mt_won and not wins else
                number or (ledger.number(closest[0], closest[1], "{:+.3f}") if closest else None)),
        number_label=("attention's BLEU lead in Multi30k translation, the one task where it wins (attention − recurrent)"
                      if mt_won and not wins else ("attention's lead at one seed, no interval yet (nats, recurrent − attention)" if number_untested
                       else "attention's lead, within the intervals: no win (nats, recurrent − attention)" if number_overlap
                       else "attention's lead where it leads (nats, recurrent − attention)") if number else
                      "the gap where attention comes closest (nats, recurrent − attention; negative: recurrence lower"
                      + ("; the intervals overlap there: a tie)" if closest and closest[2] else ")")),
        not_measured=["The GPU tier of the frontier (1e15 FLOPs and beyond; 1e14 runs on the CPU): `python src/train.py "
                      "-m experiment=frontier budget.flops=1e15,1e16 trainer=gpu` and `python -m seqbench.reports.report` on it. "
                      "The two 15-minute GPU sessions (one H100 on 2026-11-26, one H200 on 2026-11-29) trained "
                      "Zaremba et al.'s LSTMs on PTB (test perplexity "
                      + " and ".join(f"{ledger.number(ledger.json(p)['test/ppl'], p, '{:.2f}').md()} ({size})"
                                     for size, p in GPU_RUNS.items())
                      + ", stopped by the device budget before their recipes' end) and 13 jobs of the tuning's "
                      "transfer check, no attention model of this tier.",
                      *(["The tuned frontier (issue 36): `bash scripts/campaign_background.sh tune_frontier` (and "
                         "`tune_frontier_ptb`), then `python -m seqbench.reports.frontier_tuned` on its final cells."] if untuned
                        else [f"The final cells' remaining seeds: {cells_read - full} of {cells_read} cells have fewer than "
                              f"{plan} (the chains of experiments/tuning-protocol.md)."] if partial else []),
                      "The matched-size comparisons (`ptb-families.md`, `shakespeare-families.md`): their runs' "
                      "metrics were not committed; `python src/train.py -m experiment=ptb_families` (and "
                      "`shakespeare_families`) then `python -m seqbench.reports.report <sweep> --out "
                      "experiments/figures/<corpus>` records them.",
                      *([f"Translation with every family under one label-smoothing rule: {translation.COMMAND}."]
                        if mt is None and not ledger.has(translation.RECORD) else
                        [f"Translation: `{translation.RECORD}` ranks no {' and no '.join(translation.missing(ledger))} "
                         "family yet (one needs two seeds that differ): the sweep's remaining runs, "
                         f"{translation.COMMAND}."] if mt is None else [])])
