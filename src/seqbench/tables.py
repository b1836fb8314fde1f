"""The one writer of the Markdown tables every page and record shows, and how their numbers are written.

About eighteen functions built their tables each its own way (the separator typed as `|---|---|`, built as
`"|" + "---|" * n`, or as `"|---" * n + "|"`; cells joined by hand at thirty-seven sites), so a change
to how a page aligns a column or escapes a cell was a change in eighteen places, each a chance to
break one page. Every table now comes from `table` (or `table_lines`, for a page that adds lines after
it); a cell is whatever `str` gives (None: a blank cell), the caller formats its numbers.

How a loss is written (`loss_text`): fixed decimals, except below 0.01, where a solved probe's loss
(0.0002) would print as 0.000 and read as exactly zero; there, the same number of significant digits
in scientific notation (2.0e-04). One rule for every report, so a table and its heatmap agree.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence


def table_lines(head: Sequence[object], rows: Iterable[Sequence[object]] = (), align: str = "") -> list[str]:
    """The header, the rule and one line per row. `align`: one letter per column, `r` right-aligned (numbers),
    anything else (or a column past its end) left as Markdown's default."""
    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align.ljust(len(head))[:len(head)])
    return [_line(head), rule, *(_line(row) for row in rows)]


def table(head: Sequence[object], rows: Iterable[Sequence[object]] = (), align: str = "") -> str:
    """`table_lines` as one string."""
    return "\n".join(table_lines(head, rows, align))


def table_row(cells: Sequence[object]) -> str:
    """One row alone, for a command that prints its table a row at a time as each is measured."""
    return _line(cells)


def _line(cells: Sequence[object]) -> str:
    """`| a | b |`; a cell of None is left blank (`| a | |`: a header over a column of marks, a total's
    empty cell), while a value that prints empty keeps its padding (`| a |  |`)."""
    return "|" + "|".join(" " if c is None else f" {c} " for c in cells) + "|"


def loss_text(value: float, decimals: int = 3) -> str:
    """`value` with `decimals` decimals, or `decimals - 2` significant decimals in e-notation below 0.01."""
    if abs(value) >= 0.01 or value == 0:
        return f"{value:.{decimals}f}"
    return f"{value:.{max(decimals - 2, 0)}e}"


def mean_std(values: list[float]) -> tuple[float | None, float | None]:
    """The mean and the sample standard deviation of the finite values (None for what cannot be computed:
    no value, or one, whose spread is unknown rather than zero)."""
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)
