"""Where Tiny Shakespeare's tier beyond reads differently: part of its score half is a play the training text lacks.

The held-out score is the validation tenth's second half. The tenth continues *The Taming of the Shrew*, which
begins in the training split, and at its first `Master:` becomes *The Tempest*, of which the training split
has no line (tests/test_unseen_text.py checks both on the corpus). `python -m seqbench.analysis.loss_by_position`
records each run's loss on the score half's Shrew (`SEEN`) and on its Tempest (`UNSEEN`); this reads, for each
family with runs at the record's two highest budgets, what ten times the compute did to each. Lower on the
seen play and higher on the unseen one is memorising the text, not learning the language: the score falls
for one kind of text and rises for the other, and the verdict's row alone cannot tell which happened.

A change is called only where it is larger than the largest seed sd of the score half's two stretches in the
record (the noise the seeds show); smaller, it is "within the seeds' sd". That is a one-sd rule, weaker than
the verdict's 95 % intervals: with three runs against one, a change's own sd is about 1.15 times a run's. It
says which way a family moved, not a ranking; the ranking is the verdict's.
"""

from __future__ import annotations

RECORD = "experiments/figures/loss-by-position-shakespeare/cells.csv"  # loss_by_position's means over seeds
SEEN, UNSEEN = "test, from `KATHARINA:`", "test, from `Master:`"  # the score half's Shrew, then its Tempest


def _value(row: dict, column: str) -> float | None:
    return float(row[column]) if row.get(column) not in (None, "") else None


def cells_of(rows: list[dict]) -> dict[tuple[str, float, str], dict]:
    """The record's cells by (family, budget, size: `params_non_embedding`), each with both stretches; a cell
    without a budget or a stretch (a record made without the marks) is left out. The record already holds
    each cell's mean over its seeds (`loss_by_position.cell_rows`): nothing is averaged again here."""
    return {(r["family"], float(r["budget"]), r["params_non_embedding"]): r for r in rows
            if r.get("budget") and _value(r, SEEN) is not None and _value(r, UNSEEN) is not None}


def changes(rows: list[dict]) -> tuple[float | None, float | None, dict[str, dict]]:
    """(low, high, per family): the record's two highest budgets, and for each family with a cell of one size
    at both, the change of its mean SEEN and UNSEEN loss from low to high (after minus before) and its runs at
    each."""
    cells = cells_of(rows)
    budgets = sorted({b for _, b, _ in cells})
    if len(budgets) < 2:
        return None, None, {}
    low, high = budgets[-2:]
    out = {}
    for family, _, size in cells:
        a, b = cells.get((family, low, size)), cells.get((family, high, size))
        if a and b and family not in out:
            out[family] = {stretch: _value(b, stretch) - _value(a, stretch) for stretch in (SEEN, UNSEEN)}
            out[family]["runs"] = (runs(a), runs(b))
    return low, high, out


def runs(cell: dict) -> int:
    """The runs both stretches of a cell are over (`n: <stretch>`; a record without the counts: `runs`)."""
    counts = [cell.get(f"n: {s}") for s in (SEEN, UNSEEN)]
    return min(int(n) for n in counts) if all(n not in (None, "") for n in counts) else int(cell["runs"])


def noise(rows: list[dict]) -> float | None:
    """The largest seed sd of the SEEN or UNSEEN loss over the record's cells (a cell has one where it has two
    runs or more)."""
    sds = [_value(cell, f"sd: {s}") for cell in cells_of(rows).values() for s in (SEEN, UNSEEN)]
    sds = [sd for sd in sds if sd is not None]
    return max(sds) if sds else None


def sentence(ledger, frontier_top: float) -> str | None:
    """The headline's reason for the tier beyond on Tiny Shakespeare, every number linked to the record; None
    where the record, its stretches, two budgets of one family, or a highest budget beyond the frontier's
    `frontier_top` tier are not there."""
    if not ledger.has(RECORD):
        return None
    rows = ledger.rows(RECORD)
    low, high, by_family = changes(rows)
    if not by_family or high <= frontier_top:
        return None
    sd = noise(rows)

    def word(change: float) -> str:
        if sd is not None and abs(change) <= sd:
            return "within the seeds' sd"
        return "lower" if change < 0 else "higher"

    def n(value: float) -> str:
        return ledger.number(value, RECORD, "{:+.3f}").md()

    groups: dict[tuple[str, str], list[str]] = {}
    for family, c in by_family.items():
        runs = "{} → {} runs".format(*c["runs"])
        groups.setdefault((word(c[SEEN]), word(c[UNSEEN])), []).append(
            f"{family} ({n(c[SEEN])} and {n(c[UNSEEN])}, {runs})")
    said = "; ".join(f"{', '.join(fams)}: {seen} on the Shrew, {unseen} on the Tempest"
                     for (seen, unseen), fams in groups.items())
    return (f"Where the tier beyond differs on Tiny Shakespeare: its score half is partly *The Tempest*, a play the "
            f"training text lacks, after *The Taming of the Shrew*, which it holds "
            f"(`python -m seqbench.analysis.loss_by_position`). From {budget(low)} to {budget(high)} FLOPs, the change of "
            f"each family's mean loss on the score half's Shrew and on its Tempest was {said}"
            + (f" (a change within the largest seed sd of a stretch, {ledger.number(sd, RECORD).md()}, is not called: "
               f"a one-sd rule, which says the direction, not a ranking)"
               if sd is not None else " (one run a cell: seen, not yet tested against the seeds' noise)") + ".")


def budget(flops: float) -> str:
    return f"{flops:.0e}".replace("e+", "e")
