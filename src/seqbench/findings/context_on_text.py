"""Claim 2 on real text: does an attention model's loss depend on distant tokens that a recurrent
model's does not? (Khandelwal et al. 2018, "Sharp Nearby, Fuzzy Far Away".)

The probes ask whether a model *can* carry information over T steps; this asks whether the language
models trained here *do*, on their corpus. Read from the context-usage records of the tuned 1e13 models
(`seqbench.analysis.context_usage`, every family of a corpus on the same sampled test targets):

- **far identities**: the loss increase when every token farther than FAR is replaced by a draw from
  the training split's unigram distribution. A model that does not use those tokens loses nothing.
- **order**: the increase when every token but the last is shuffled (identities kept, order destroyed),
  which says whether what a model takes from its context is a sequence or a bag of tokens.

A corpus counts for attention only when some attention model's far-identity increase lies above every
recurrent model's, the two ± Z paired standard errors apart: the same rule as a winner on the
frontier (outside the intervals, or no call). Each increase is paired within its own model, so the
intervals are per model; the models are compared on the same targets but not paired with each other,
which makes the rule conservative.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from seqbench.findings import conditions_of, family_kind

RECORDS = {"PTB": "experiments/figures/context-tuned-ptb/context_usage.csv",
           "Tiny Shakespeare": "experiments/figures/context-tuned-shakespeare/context_usage.csv"}
FAR = 50  # tokens: beyond every recurrent model's BPTT window on PTB (35), near it on Tiny Shakespeare (64)
Z = 2.0
SECTION = "the-tuned-models-at-1e13-flops-attention-at-256-tokens-issue-36-item-6"  # context-usage.md's anchor


@dataclass
class OnText:
    """What the text records add to claim 2; empty where no record is committed yet."""
    answer: list[str] = field(default_factory=list)
    ahead: list[str] = field(default_factory=list)      # corpora where attention uses distant tokens more
    behind: list[str] = field(default_factory=list)     # corpora measured where it does not
    confidence: str = ""
    conditions: list[str] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)


def _cell(rows: list[dict], run: str, measure: str, x: int) -> dict | None:
    return next((r for r in rows if r["run"] == run and r["measure"] == measure and r["x"] and int(r["x"]) == x), None)


def compare(rows: list[dict]) -> tuple[dict, dict]:
    """Per kind, the run whose far-identity increase is largest: {kind: (delta, se, family, run)}, and
    the same increase for every run ({run: (family, kind, delta, se)})."""
    per_run, best = {}, {}
    for run in dict.fromkeys(r["run"] for r in rows):
        cell = _cell(rows, run, "replace", FAR)
        kind = family_kind(cell["family"]) if cell else None
        if cell is None or kind is None or not cell["delta"]:
            continue
        delta, se = float(cell["delta"]), float(cell["se"] or 0.0)
        per_run[run] = (cell["family"], kind, delta, se)
        if delta > best.get(kind, (float("-inf"),))[0]:
            best[kind] = (delta, se, cell["family"], run)
    return best, per_run


def attention_ahead(best: dict) -> bool | None:
    """Whether the best attention model's interval lies above the best recurrent model's; None when a
    kind is missing."""
    if "attention" not in best or "recurrent" not in best:
        return None
    (a, a_se, *_), (r, r_se, *_) = best["attention"], best["recurrent"]
    return a - Z * a_se > r + Z * r_se


def on_text(ledger) -> OnText:
    out = OnText()
    recorded = {corpus: path for corpus, path in RECORDS.items() if ledger.has(path)}
    if not recorded:
        return out
    out.answer = [f"On text, the tuned 1e13 models ([context-usage.md](context-usage.md)): the loss increase "
                  f"(nats, ± paired s.e.) when every token farther than {FAR} is replaced by unigram draws, and "
                  f"when every token but the last is shuffled:", "",
                  f"| corpus | family | run | kind | beyond {FAR} replaced | all but the last shuffled |",
                  "|---|---|---|---|---:|---:|"]
    said = []
    for corpus, path in recorded.items():
        rows = ledger.rows(path)
        best, per_run = compare(rows)
        if rows:  # the analysis's plot of the corpus: context_<data name>.png beside the CSV
            out.figures.append(path.rsplit("/", 1)[0] + f"/context_{rows[0]['corpus']}.png")
        for run, (family, kind, delta, se) in per_run.items():
            order = _cell(rows, run, "shuffle", 1)
            shuffled = (f"{ledger.number(float(order['delta']), path, '{:+.3f}').md()} ± {float(order['se']):.3f}"
                        if order and order["delta"] else "–")
            out.answer.append(f"| {corpus} | {family} | {run} | {kind} | "
                              f"{ledger.number(delta, path, '{:+.3f}').md()} ± {se:.3f} | {shuffled} |")
        ahead = attention_ahead(best)
        if ahead is None:
            continue
        (out.ahead if ahead else out.behind).append(corpus)
        (a, a_se, fa, _), (r, r_se, fr, _) = best["attention"], best["recurrent"]
        said.append(f"{corpus}: attention {ledger.number(a, path, '{:+.3f}').md()} ± {a_se:.3f} ({fa}) against "
                    f"recurrent {ledger.number(r, path, '{:+.3f}').md()} ± {r_se:.3f} ({fr}), "
                    + ("apart" if ahead else "not apart"))
    out.confidence = (f" On text, the largest increase of each kind when the tokens beyond {FAR} are replaced "
                      f"(± {Z:g} s.e. must not overlap): " + "; ".join(said) + ". One model per family and "
                      "window, one seed each." if said else "")
    out.conditions = [f"On text: the tuned 1e13-FLOP language models of {', '.join(recorded)} at size m, seed 1234, "
                      "each family at its setting from the transfer check, attention also trained on 256-token "
                      "windows; every model of a corpus read on the same sampled test targets "
                      f"([context-usage.md](context-usage.md#{SECTION}))."]
    out.conditions += conditions_of(ledger, *recorded.values())
    return out
