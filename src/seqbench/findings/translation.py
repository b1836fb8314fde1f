"""The headline's second language task: translation, where every family trained by one label-smoothing rule.

Language modelling (the frontier) is not the only language task the texts mean when they say Transformers
surpass recurrent networks; translation is where the Transformer was introduced. Multi30k's table under one
rule (`experiment=multi30k_label_smoothing`: every family 10 epochs, label smoothing 0.1, two seeds, beam 5 on
test) is recorded by `python -m seqbench.analysis.translation_table ... --report
experiments/figures/multi30k-label-smoothing`, whose `bleu.csv` gives each family's test BLEU over seeds
and its kind. This reads the best attention family's BLEU against the best recurrent family's (the Bahdanau
and Luong models are recurrent encoder-decoders with an attention layer: recurrent here, as the registry
declares their GRU) and applies the frontier's rule (`seqbench.verdict.call`): a kind wins only where its
interval lies above the other's, else a tie. Runs with smoothing 0.0 (the pair shown both ways) are not read:
they are the control of the rule, not the rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from seqbench.verdict import call, interval_of

RECORD = "experiments/figures/multi30k-label-smoothing/bleu.csv"
RULE = 0.1  # the label smoothing every family trained with in the table's rule
WHERE = "Multi30k translation"
COMMAND = ("`bash scripts/sweep_background.sh mt_ls experiment=multi30k_label_smoothing` (then `mt_ls_pair`, the pair "
           "without smoothing), and `python -m seqbench.analysis.translation_table outputs/sweeps/mt_ls "
           "outputs/sweeps/mt_ls_pair --report experiments/figures/multi30k-label-smoothing`")


@dataclass
class Reading:
    attention: dict      # the best attention family's row of bleu.csv
    recurrent: dict      # the best recurrent family's
    winner: str | None   # "attention", "recurrent", or None: a tie


def _best(rows: list[dict], kind: str) -> dict | None:
    rows = [r for r in rows if r["kind"] == kind]
    return max(rows, key=lambda r: float(r["bleu_mean"])) if rows else None


def _interval(row: dict):
    return interval_of(float(row["bleu_mean"]), float(row["bleu_sd"]) if row["bleu_sd"] else None, int(row["seeds"]))


def reading(ledger) -> Reading | None:
    """The record's rule rows read as best attention against best recurrent; None where the record is not
    there or lacks a kind."""
    if not ledger.has(RECORD):
        return None
    rows = [r for r in ledger.rows(RECORD) if float(r["label_smoothing"]) == RULE]
    a, r = _best(rows, "attention"), _best(rows, "recurrent")
    if not (a and r):
        return None
    winner, _ = call({"attention": _interval(a), "recurrent": _interval(r)}, higher_is_better=True)
    return Reading(a, r, winner)


def _cell(ledger, row: dict) -> str:
    i = _interval(row)
    mean = ledger.number(i.mean, RECORD, "{:.2f}").md()
    spread = (f" ± {ledger.number(i.sd, RECORD, '{:.2f}').md()} [{ledger.number(i.low, RECORD, '{:.2f}').md()}, "
              f"{ledger.number(i.high, RECORD, '{:.2f}').md()}]" if i.sd is not None else "")
    return f"{row['family']} ({row['model']}) {mean}{spread} (n={i.n})"


def answer(ledger, rd: Reading) -> list[str]:
    """The answer's lines for translation: one row, BLEU (higher is better)."""
    gap = float(rd.attention["bleu_mean"]) - float(rd.recurrent["bleu_mean"])
    ia, ir = _interval(rd.attention), _interval(rd.recurrent)
    check = ("one seed; no interval" if ia.sd is None or ir.sd is None else
             "intervals overlap" if rd.winner is None else "intervals apart")
    return ["", f"{WHERE} (de→en, test2016): test BLEU of each kind's best family, every family trained 10 epochs "
                f"with label smoothing {RULE:g}, mean ± sd [95 % interval] over seeds; higher is better.", "",
            "| task | best attention | best recurrent | attention − recurrent (BLEU) | interval check |",
            "|---|---|---|---:|---|",
            f"| {WHERE} | {_cell(ledger, rd.attention)} | {_cell(ledger, rd.recurrent)} | "
            f"{ledger.number(gap, RECORD, '{:+.2f}').md()} | {check} |"]


def sentence(rd: Reading) -> str:
    a, r = rd.attention["family"], rd.recurrent["family"]
    if rd.winner == "attention":
        return f"In {WHERE}, every family under one label-smoothing rule, the {a}'s BLEU interval lies above the {r}'s: attention wins."
    if rd.winner == "recurrent":
        return f"In {WHERE}, every family under one label-smoothing rule, the {r}'s BLEU interval lies above the {a}'s: recurrence wins."
    return (f"In {WHERE}, every family under one label-smoothing rule, the intervals of the best attention family "
            f"({a}) and the best recurrent one ({r}) overlap: a tie.")
