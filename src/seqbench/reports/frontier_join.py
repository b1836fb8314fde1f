"""Several frontier reports' budget tables joined into one, with each family's gap to a reference family.

    python -m seqbench.reports.pages experiments/parallel-recurrences.md          # rewrite (every marked table)
    python -m seqbench.reports.pages experiments/parallel-recurrences.md --check  # differs? exit 1

Families added after a frontier sweep (the parallel recurrences of issue 35) run the same sweep with
the same protocol later; their report and the first one each hold a "Compute-efficient frontier"
table (`seqbench.reports.report`: per budget, each family's best validation loss, its size and seeds). A page
shows them side by side by marking the place, paths relative to the page:

    <!-- frontier-join ref=gpt: figures/frontier-shakespeare/report.md figures/frontier-shakespeare-parallel/report.md -->
    ...table, rewritten by this command...
    <!-- /frontier-join -->

and, with `within=mingru:0.03,ssm:0.04` after the reference, a second table checks a target gap
at every budget (issue 35: the parallel recurrences within 0.03/0.04 nats of GPT). Everything
between the markers is replaced. A cell is the family's loss and, in brackets, its gap to
`ref` in nats (negative: better than `ref`); the last column names the lowest loss. The numbers are the
reports' own, parsed, never recomputed: a join cannot disagree with the reports it cites. Where a
report's cell has one seed, so has the join's: the page must not read a gap as a verdict (that is
`seqbench.protocol.verdict`'s, with seeds).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from seqbench.families import order
from seqbench.tables import table

BLOCK = re.compile(r"(<!-- frontier-join ref=(?P<ref>\w+)(?: within=(?P<within>[\w:.,]+))?: (?P<paths>[^>]+?) -->\n)"
                   r"(?P<body>.*?)(<!-- /frontier-join -->)", re.S)
CELL = re.compile(r"(?P<loss>\d+\.\d+)(?: ± (?P<sd>\d+\.\d+))? \((?P<size>[^,]+), n=(?P<n>\d+)\)")
SECTION = "## Compute-efficient frontier"
TRAINED = re.compile(r"^\| (?P<family>\w+) [^|@]*@ (?P<budget>[\d.e+-]+) \|", re.M)  # a per-configuration row
ENVELOPE = "### Lower envelope"  # reports since the verdict table put the envelope under this subheading


def frontier_table(report: str) -> dict[float, dict[str, dict]]:
    """{budget: {family: {"loss", "sd", "size", "n"}}} from a report's compute-efficient frontier table: the
    lower envelope, which every report has (a newer one has the seed-mean verdict table first, then the
    envelope under its own subheading; an older one, the envelope alone), so reports of either age join
    like with like."""
    if SECTION not in report:
        raise ValueError(f"no '{SECTION}' section in the report")
    # a family's envelope carries its best loss on to budgets it never trained to; those cells are not
    # its result at that budget, so they are left out ("not run"), read from the per-configuration rows
    trained: dict[str, float] = {}
    for m in TRAINED.finditer(report.split(SECTION, 1)[0]):
        trained[m["family"]] = max(trained.get(m["family"], 0.0), float(m["budget"]))
    section = report.split(SECTION, 1)[1]
    if ENVELOPE in section:
        section = section.split(ENVELOPE, 1)[1].split("\n", 1)[1]
    lines = section.lstrip("\n").splitlines()
    rows = [line for line in lines[: next((i for i, l in enumerate(lines) if not l.startswith("|")), len(lines))]]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    families = header[1:-1]  # budget | families... | winner
    out: dict[float, dict[str, dict]] = {}
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        out[float(cells[0])] = {}
        for family, cell in zip(families, cells[1:-1]):
            if (m := CELL.fullmatch(cell)) and float(cells[0]) <= trained.get(family, math.inf) * 1.05:
                out[float(cells[0])][family] = {"loss": float(m["loss"]), "sd": float(m["sd"]) if m["sd"] else None,
                                                "size": m["size"], "n": int(m["n"])}
    return out


def join(tables: list[dict[float, dict[str, dict]]]) -> dict[float, dict[str, dict]]:
    """The tables merged by budget; a family in two reports is an error (which one would be right?)."""
    out: dict[float, dict[str, dict]] = {}
    for table in tables:
        for budget, cells in table.items():
            row = out.setdefault(budget, {})
            if twice := set(row) & set(cells):
                raise ValueError(f"{sorted(twice)} at {budget:.0e} FLOPs in more than one report")
            row.update(cells)
    return out


def render(joined: dict[float, dict[str, dict]], ref: str, order: list[str] | None = None) -> str:
    """The joined table: loss (gap to ref), size and seeds per family and budget, the lowest named."""
    families = order or sorted({f for cells in joined.values() for f in cells})
    rows = []
    for budget in sorted(joined):
        cells = joined[budget]
        base = cells.get(ref, {}).get("loss")

        def cell(f: str) -> str:
            if f not in cells:
                return "–"
            c = cells[f]
            gap = "" if base is None or f == ref else f" ({c['loss'] - base:+.3f})"
            return f"{c['loss']:.3f}{gap}<br>{c['size']}, n={c['n']}"

        lowest = min(cells, key=lambda f: cells[f]["loss"]) if cells else "–"
        rows.append([f"{budget:.0e}", *(cell(f) for f in families), lowest])
    return table(["budget (FLOPs)", *families, "lowest"], rows, align="l" + "r" * len(families) + "l") + "\n"


def render_within(joined: dict[float, dict[str, dict]], ref: str, within: dict[str, float]) -> str:
    """Per family and budget: its gap to `ref`, the most the target allows, and whether it is met
    (a loss lower than the reference's meets it; a budget either lacks is "not run")."""
    rows = []
    for family, most in within.items():
        for budget in sorted(joined):
            cells = joined[budget]
            if family in cells and ref in cells:
                gap = cells[family]["loss"] - cells[ref]["loss"]
                rows.append([family, f"{budget:.0e}", f"{gap:+.3f}", f"≤ {most:g}", "yes" if gap <= most else "**no**"])
            else:
                rows.append([family, f"{budget:.0e}", "not run", f"≤ {most:g}", "–"])
    return table(["family", "budget (FLOPs)", f"gap to {ref} (nats)", "target", "met"], rows, align="llrrl") + "\n"


def parse_within(spec: str | None) -> dict[str, float]:
    """"mingru:0.03,ssm:0.04" -> {"mingru": 0.03, "ssm": 0.04}."""
    return {name: float(gap) for name, gap in (item.split(":") for item in spec.split(","))} if spec else {}


def rewrite(text: str, base: Path) -> str:
    """`text` (a page) with every marked join made anew from its reports, paths relative to `base`."""
    def fill(match: re.Match) -> str:
        joined = join([frontier_table((base / p).read_text()) for p in match["paths"].split()])
        body = render(joined, match["ref"], order({f for cells in joined.values() for f in cells}))
        if within := parse_within(match["within"]):
            body += "\n" + render_within(joined, match["ref"], within)
        return match.group(1) + body + match.group(6)

    return BLOCK.sub(fill, text)
