"""The texts' claims about recurrence and attention, each answered from the ledger's records.

`python -m seqbench.findings` writes `experiments/findings.md` and the summary table between the
`<!-- findings-summary -->` markers of README.md. Each claim is one module here that reads its
records through `seqbench.ledger` and returns a `Claim`: the measured answer with its conditions,
the figure, a verdict, the confidence and what would change it. Every number on the page is a
`ledger.Number`, printed as a link to the file it came from; where no record answers, the claim
says "not measured" and names the run that would. Nothing on the page is typed by hand, so a new
record changes the page the next time the generator runs, and a test fails until it does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from seqbench.ledger import Number

HOLDS = "holds"
HOLDS_ONLY = "holds only"  # followed by the condition: "holds only when ..." / "holds only on ..."
DOES_NOT_HOLD = "does not hold here"
NOT_MEASURED = "not measured"


@dataclass
class Claim:
    key: str                  # the page's anchor
    claim: str                # as the texts state it
    verdict: str              # HOLDS, "holds only ...", DOES_NOT_HOLD or NOT_MEASURED: short, for the README
    answer: list[str]         # markdown lines: the measured answer, numbers linked to their records
    conditions: list[str]     # corpus, size, budget, hardware, date: read from the records
    figures: list[str]        # repository paths of the PNGs that show it
    confidence: str
    would_change: str
    detail: str = ""          # the verdict's reason, on the page only
    number: Number | None = None  # the one number the README's summary shows
    number_label: str = ""
    not_measured: list[str] = field(default_factory=list)  # what no record answers, and the run that would


def family_kind(name: str) -> str | None:
    """'attention' or 'recurrent' for a family named in a record ("ptb/gpt:dropout=0", "lstm_fb1",
    "transformer_causal"), read from the family registry's `kind` (the one place families are declared);
    None for a name the registry does not know or a family of neither kind."""
    from seqbench.families import FAMILIES

    base = name.split("/")[-1].split(":")[0]
    if base not in FAMILIES:
        base = next((f for f in FAMILIES if base.startswith(f"{f}_")), base)
    family = FAMILIES.get(base)
    return family.kind if family else None


def conditions_of(ledger, *paths) -> list[str]:
    """One line per record: what it is, on what machine, when, from which commit."""
    lines = []
    for path in paths:
        r = ledger.record_of(path)
        lines.append(f"`{path}`: {r.hardware}; {r.date}; git {r.git_commit}")
    return lines


def claims(ledger) -> list[Claim]:
    """Every claim, in the order the page gives them."""
    from seqbench.findings import gradients, headline, long_range, size, speed

    return [module.claim(ledger) for module in (speed, long_range, gradients, size, headline)]
