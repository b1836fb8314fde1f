"""The headline's second language task: translation, where every family trained by one label-smoothing rule.

Language modelling (the frontier) is not the only language task the texts mean when they say Transformers
surpass recurrent networks; translation is where the Transformer was introduced. Multi30k's table under one
rule (`experiment=multi30k_label_smoothing`: every family the same epochs with label smoothing 0.1, two
seeds, beam 5 on test) is recorded by `python -m seqbench.reports.translation_table ... --report
experiments/figures/multi30k-label-smoothing`, whose `bleu.csv` gives each family's test BLEU over seeds with
its 95 % interval, its mean best validation BLEU, its epochs and its kind. This reads it as the frontier is
read:

- each kind's entry is its ranked family (two seeds or more that differ) with the highest mean *validation*
  BLEU: the family is chosen on data apart from the score, and the test BLEU is the score;
- the Bahdanau and Luong models are recurrent encoder-decoders with an attention layer, so they stand on the
  recurrent side (the registry's kind of their GRU), and their cell names the layer;
- a kind wins only where its test-BLEU interval over seeds lies above the other's
  (`seqbench.protocol.verdict.winner_or_tie`) **and** the gap's 95 % interval over paired draws of the test sentences
  (the table's `gaps.csv`, `seqbench.analysis.bleu_bootstrap`) excludes 0. The first holds the test set
  fixed and moves the seed; the second holds the trained models fixed and moves the sentences; neither covers
  both, and with two seeds nothing can, so a win must pass each. Where the table had no translations to draw
  from (jobs restored from the sweep archive), the seeds' interval decides alone, and the answer says so.

Runs with smoothing 0.0 (the pair shown both ways) are not read: they are the rule's control, not the rule.
A record whose rule rows mix the epochs given is not one rule and stops the generator.
"""

from __future__ import annotations

from dataclasses import dataclass

from seqbench.protocol.verdict import Interval, winner_or_tie
from seqbench.tables import table_lines

RECORD = "experiments/figures/multi30k-label-smoothing/bleu.csv"
GAPS = "experiments/figures/multi30k-label-smoothing/gaps.csv"  # the test sentences' bootstrap of each gap
RULE = 0.1  # the label smoothing every family trained with in the table's rule
WHERE = "Multi30k translation"
COMMAND = ("`bash scripts/sweep_background.sh mt_ls experiment=multi30k_label_smoothing` (then `mt_ls_pair`, the pair "
           "without smoothing), and `python -m seqbench.reports.translation_table outputs/sweeps/mt_ls "
           "outputs/sweeps/mt_ls_pair --report experiments/figures/multi30k-label-smoothing`")


@dataclass
class Reading:
    attention: dict      # the attention side's entry: its row of bleu.csv
    recurrent: dict      # the recurrent side's
    winner: str | None   # "attention", "recurrent", or None: a tie
    seeds_apart: bool    # the seeds' intervals lie apart (a win unless the sentence draws take the gap to 0)
    epochs: str          # the epochs every family was given
    unranked: list[str]  # families of the rule without an interval ("t5 (one seed)")
    bootstrap: dict | None = None  # the two entries' row of gaps.csv, where the table could draw it


def interval(row: dict) -> Interval:
    """The row's interval as the table computed it (its low and high), never recomputed from rounded numbers."""
    sd = float(row["bleu_sd"]) if row["bleu_sd"] else None
    low, high = (float(row["low"]), float(row["high"])) if sd is not None else (-float("inf"), float("inf"))
    return Interval(float(row["bleu_mean"]), sd, int(row["seeds"]), low, high)


def _entry(rows: list[dict], kind: str) -> dict | None:
    rows = [r for r in rows if r["kind"] == kind and not r["verdict"].startswith("unranked")]
    missing = [r["family"] for r in rows if not r["val_bleu_mean"]]
    if missing:
        raise ValueError(f"{RECORD}: {', '.join(missing)} have no validation BLEU to be chosen on")
    return max(rows, key=lambda r: float(r["val_bleu_mean"])) if rows else None


def reading(ledger) -> Reading | None:
    """The record's rule rows as one entry per kind; None where the record is not there or a kind has no
    ranked family."""
    if not ledger.has(RECORD):
        return None
    rows = [r for r in ledger.rows(RECORD) if float(r["label_smoothing"]) == RULE]
    if any(not r.get("kind") for r in rows):
        raise ValueError(f"{RECORD}: a row without a kind (recurrent or attention); make it again with translation_table")
    epochs = {r["epochs_given"] for r in rows if int(r["seeds"])}  # a family with no run ended may not have said yet
    if len(epochs) > 1:
        raise ValueError(f"{RECORD}: the families were given different epochs ({', '.join(sorted(epochs))}): not one rule")
    a, r = _entry(rows, "attention"), _entry(rows, "recurrent")
    if not (a and r):
        return None
    by_seeds, _ = winner_or_tie({"attention": interval(a), "recurrent": interval(r)}, higher_is_better=True)
    unranked = [f"{x['family']} ({x['verdict'].split(': ', 1)[1]})" for x in rows if x["verdict"].startswith("unranked")]
    pair = [g for g in (ledger.rows(GAPS) if ledger.has(GAPS) else [])
            if float(g["label_smoothing"]) == RULE and (g["attention"], g["recurrent"]) == (a["family"], r["family"])]
    g = pair[0] if pair else None
    sentences_agree = g is None or not float(g["low"]) <= 0 <= float(g["high"])
    return Reading(a, r, by_seeds if sentences_agree else None, by_seeds is not None, epochs.pop(), unranked, g)


def missing(ledger) -> list[str]:
    """The kinds the record has no ranked family of at the rule's smoothing (the sweep still running)."""
    rows = [r for r in ledger.rows(RECORD) if float(r["label_smoothing"]) == RULE and not r["verdict"].startswith("unranked")]
    return [k for k in ("attention", "recurrent") if k not in {r["kind"] for r in rows}]


def label(row: dict) -> str:
    """`bahdanau (gru + bahdanau attention)`, `seq2seq (lstm, no attention)`, `transformer`."""
    layer = row["attention_layer"]
    model = row["model"] if row["model"] != row["family"] else ""
    what = f"{model} + {layer} attention" if layer and layer != "none" else f"{model}, no attention" if layer else model
    return f"{row['family']} ({what})" if what else row["family"]


def _cell(ledger, row: dict) -> str:
    i = interval(row)
    number = lambda v: ledger.number(v, RECORD, "{:.2f}").md()  # noqa: E731
    return f"{label(row)} {number(i.mean)} ± {number(i.sd)} [{number(i.low)}, {number(i.high)}] (n={i.n})"


def gap(rd: Reading) -> float:
    return float(rd.attention["bleu_mean"]) - float(rd.recurrent["bleu_mean"])


def answer(ledger, rd: Reading) -> list[str]:
    """The answer's lines for translation: one row, BLEU (higher is better)."""
    g = rd.bootstrap
    check = ("intervals overlap" if not rd.seeds_apart else "intervals apart" if rd.winner else
             "intervals apart; the sentence draws take the gap to 0")
    drawn = (f"[{ledger.number(float(g['low']), GAPS, '{:+.2f}').md()}, {ledger.number(float(g['high']), GAPS, '{:+.2f}').md()}]"
             if g else "– (no translations to draw from: the seeds decide alone)")
    sentences = f"{int(g['sentences']):,}" if g and g.get("sentences") else "test"
    return ["", f"{WHERE} (de→en, test2016): test BLEU of each kind's family with the best validation BLEU, every "
                f"family {rd.epochs} epochs with label smoothing {RULE:g}, mean ± sd [95 % interval] over seeds; "
                "higher is better. The last column draws the test sentences instead of the seeds: the gap's 95 % "
                f"interval over paired resamples of the {sentences} sentences (`seqbench.analysis.bleu_bootstrap`); a "
                "kind wins only where both intervals say so.", "",
            *table_lines(["task", "attention", "recurrent", "attention − recurrent (BLEU)", "interval check",
                          "the gap over test-sentence draws"],
                         [[WHERE, _cell(ledger, rd.attention), _cell(ledger, rd.recurrent),
                           ledger.number(gap(rd), RECORD, "{:+.2f}").md(), check, drawn]], align="lllrll")]


def sentence(rd: Reading) -> str:
    a, r = label(rd.attention), label(rd.recurrent)
    where = f"In {WHERE}, every family {rd.epochs} epochs under one label-smoothing rule"
    tail = f" Not ranked: {', '.join(rd.unranked)}." if rd.unranked else ""
    g = rd.bootstrap
    if rd.seeds_apart and not rd.winner:
        lead = a if float(rd.attention["bleu_mean"]) > float(rd.recurrent["bleu_mean"]) else r
        return (f"{where}, the test-BLEU intervals over seeds of {a} and {r} lie apart, {lead} above; but resampling "
                f"the test sentences, with these trained models fixed, gives the gap a 95 % interval "
                f"[{float(g['low']):+.2f}, {float(g['high']):+.2f}] that includes 0: the test set does not establish its "
                f"sign, so no win.{tail}")
    if rd.winner == "attention":
        return f"{where}, the test-BLEU interval of {a} lies above that of {r}: attention wins.{tail}"
    if rd.winner == "recurrent":
        return f"{where}, the test-BLEU interval of {r} lies above that of {a}: recurrence wins.{tail}"
    return f"{where}, the test-BLEU intervals of {a} and {r} overlap: a tie.{tail}"


def would_change(rd: Reading) -> str:
    """What more translation runs could do to the reading, as a clause of the claim's "what would change it" (""
    where they could not): the families not ranked yet (runs to end, or seeds that differ), and more seeds where the test sentences' interval of the gap
    already excludes 0 and only the seeds' interval (two seeds: t = 12.7) overlaps."""
    parts = []
    if rd.unranked:
        parts.append(f"the translation families the verdict does not rank yet: {', '.join(rd.unranked)}")
    g = rd.bootstrap
    if rd.winner is None and not rd.seeds_apart and g and not float(g["low"]) <= 0 <= float(g["high"]):
        n = min(int(rd.attention["seeds"]), int(rd.recurrent["seeds"]))
        parts.append(f"more seeds of {label(rd.attention)} and {label(rd.recurrent)} in translation (the test "
                     f"sentences' interval of the gap, [{float(g['low']):+.2f}, {float(g['high']):+.2f}], excludes 0; "
                     f"the seeds' intervals at n={n} overlap)")
    return "".join(f"{x}; " for x in parts)


def confidence(rd: Reading) -> str:
    n = min(int(rd.attention["seeds"]), int(rd.recurrent["seeds"]))
    return (f"In translation each entry has {n} seeds or more (at two, the interval is ± 12.7 sd/√2); it covers the "
            "training seeds on one test set, not the sampling of its sentences, which the paired bootstrap of the "
            "gap over test-sentence draws shows beside it.")
