"""Claim 2 on real text: does an attention model's loss depend on distant tokens that a recurrent
model's does not? (Khandelwal et al. 2018, "Sharp Nearby, Fuzzy Far Away".)

The probes ask whether a model *can* carry information over T steps; this asks whether the language
models trained here *do*, on their corpus. Read from the context-usage records of the tuned 1e13 models
(`seqbench.analysis.context_usage`, every family of a corpus on the same sampled test targets):

- **far identities**: the loss increase when every token farther than FAR is replaced by a draw from
  the training split's unigram distribution. A model that does not use those tokens loses nothing.
- **order**: the increase when every token but the last is shuffled (identities kept, order destroyed),
  which says whether what a model takes from its context is a sequence or a bag of tokens.

A corpus counts for attention only when some attention model's far-identity interval (± Z paired
standard errors) lies wholly above every recurrent model's: the same rule as a winner on the frontier
(outside the intervals, or no call). Each increase is paired within its own model, so the intervals
are per model; the models are compared on the same targets but not paired with each other, which
makes the rule conservative. A model without a standard error, or of a family the registry does not
know, is shown and not compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from seqbench.families import kind_of
from seqbench.reports.findings.claim import conditions_of
from seqbench.reports.ledger import Number
from seqbench.tables import table_lines

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
    number: Number | None = None  # the first corpus ahead: its deciding attention model's increase


@dataclass(frozen=True)
class Increase:
    """One model's loss increase (nats) and its paired standard error; `se` None where not recorded."""
    family: str
    run: str
    kind: str | None  # "attention", "recurrent", or None for a family the registry does not know
    delta: float
    se: float | None

    @property
    def low(self) -> float:
        return self.delta - Z * self.se

    @property
    def high(self) -> float:
        return self.delta + Z * self.se


def _float(text: str) -> float | None:
    return float(text) if text not in ("", None) else None


def increases(rows: list[dict], measure: str, x: int) -> list[Increase]:
    """Every model's increase at (measure, x), in the record's order; a model is its (family, run) pair,
    since two sweeps' jobs may share a run label."""
    out = []
    for r in rows:
        if r["measure"] == measure and r["x"] and int(r["x"]) == x and _float(r["delta"]) is not None:
            out.append(Increase(r["family"], r["run"], kind_of(r["family"]), float(r["delta"]), _float(r["se"])))
    return out


def attention_ahead(far: list[Increase]) -> tuple[bool | None, Increase | None, Increase | None]:
    """Whether some attention model's interval lies wholly above every recurrent model's, with the two
    models that decide it: the attention model with the highest lower bound and the recurrent model with
    the highest upper bound. None (no call) when a kind has no model with a standard error."""
    attention = [i for i in far if i.kind == "attention" and i.se is not None]
    recurrent = [i for i in far if i.kind == "recurrent" and i.se is not None]
    if not attention or not recurrent:
        return None, None, None
    a, r = max(attention, key=lambda i: i.low), max(recurrent, key=lambda i: i.high)
    return a.low > r.high, a, r


def on_text(ledger) -> OnText:
    out = OnText()
    recorded = {corpus: path for corpus, path in RECORDS.items() if ledger.has(path)}
    if not recorded:
        return out
    out.answer = [f"On text, the tuned 1e13 models ([context-usage.md](context-usage.md)): the loss increase "
                  f"(nats, ± paired s.e.) when every token farther than {FAR} is replaced by unigram draws, and "
                  f"when every token but the last is shuffled:", ""]
    table = []
    said = []
    for corpus, path in recorded.items():
        rows = ledger.rows(path)
        far, order = increases(rows, "replace", FAR), increases(rows, "shuffle", 1)
        if rows:  # the analysis's plot of the corpus: context_<data name>.png beside the CSV
            out.figures.append(path.rsplit("/", 1)[0] + f"/context_{rows[0]['corpus']}.png")
        shown = lambda i: (f"{ledger.number(i.delta, path, '{:+.3f}').md()}"  # noqa: E731
                           + (f" ± {i.se:.3f}" if i.se is not None else " (no s.e.)")) if i else "–"
        for i in far:
            o = next((o for o in order if (o.family, o.run) == (i.family, i.run)), None)
            table.append([corpus, i.family, i.run, i.kind or "?", shown(i), shown(o)])
        ahead, a, r = attention_ahead(far)
        if ahead is None:
            continue
        (out.ahead if ahead else out.behind).append(corpus)
        if ahead and out.number is None:
            out.number = ledger.number(a.delta, path, "{:+.3f}")
        said.append(f"{corpus}: attention {shown(a)} ({a.family}, {a.run}) against recurrent {shown(r)} "
                    f"({r.family}, {r.run}), " + ("apart" if ahead else "not apart"))
    out.answer += table_lines(["corpus", "family", "run", "kind", f"beyond {FAR} replaced", "all but the last shuffled"],
                              table, align="llllrr")
    out.confidence = (f" On text, when the tokens beyond {FAR} are replaced, the attention model with the highest "
                      f"lower bound against the recurrent model with the highest upper bound (± {Z:g} s.e.): " + "; ".join(said) + ". One model per family and "
                      "window, one seed each." if said else "")
    out.conditions = [f"On text: the tuned 1e13-FLOP language models of {', '.join(recorded)} at size m, seed 1234, "
                      "each family at its setting from the transfer check, attention also trained on 256-token "
                      "windows; every model of a corpus read on the same sampled test targets "
                      f"([context-usage.md](context-usage.md#{SECTION}))."]
    out.conditions += conditions_of(ledger, *recorded.values())
    return out
