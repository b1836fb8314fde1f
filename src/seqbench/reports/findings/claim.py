"""A claim as the findings page states it, and the conditions of the records that answer it."""

from __future__ import annotations

from dataclasses import dataclass, field

from seqbench.reports.ledger import Number

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


def conditions_of(ledger, *paths) -> list[str]:
    """One line per record: what it is, on what machine, when, from which commit."""
    lines = []
    for path in paths:
        r = ledger.record_of(path)
        lines.append(f"`{path}`: {r.hardware}; {r.date}; git {r.git_commit}")
    return lines
