"""The experiment pages' result tables, made from the generated reports beside them, never typed.

    python -m seqbench.reports.pages experiments/*.md            # rewrite every marked table
    python -m seqbench.reports.pages experiments/*.md --check    # exit 1 naming each page that differs

The analysis and report commands already write their tables (`report.md`, `long_range.md`,
`context_usage.md`) and every number behind them (`runs.csv`, `bench_cpu.csv`, ...) under
`experiments/figures/`. A page marks where one of them goes, with a path relative to the page:

    <!-- table: figures/frontier-ptb/report.md#Compute-efficient frontier notes=Crossover -->
    ...rewritten by this command...
    <!-- /table -->

- `FILE.md[#Heading]`: the `table=N`-th (default first) markdown table of the file, or of the section
  under that heading (to the next heading of the same or a higher level); `grep=word` keeps only the
  rows that contain the word (and the header); `notes=Word` adds the section's lines that start
  with that word (the report's "Crossover: ..." lines) below the table, one bullet each.
- `FILE.csv`: the rows that pass every `where=column=value` (alternatives `a|b`), either listed with
  `columns=a,b,c`, or pivoted with `rows=a[,b] columns=c value=v [error=e]`: one line per value of
  the row keys, one column per value of `c` (headed `label = value`, the label `c` unless given;
  `label=-`: the value alone), the cell `v` (`± e` with an error column); two rows that fall in one
  cell stop the command. `format=` is the cell's Python format spec (default: thousands separators,
  three decimals below 100). A row
  whose `status` is not `ok` or `completed` shows its status's first word (`skipped`).

Everything between the markers is replaced, a caption naming the source included; the prose around
them stays as written. The parallel-recurrences page's `<!-- layer-bench: ... -->` blocks are
rewritten too, by `seqbench.reports.layer_bench_page`, which owns that record format, and the
`<!-- frontier-join ... -->` blocks (several frontier reports side by side) by
`seqbench.reports.frontier_join`.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

from seqbench.reports import frontier_join, layer_bench_page
from seqbench.tables import table_lines

BLOCK = re.compile(r"(<!-- table: (?P<spec>[^\n]*?) -->\n)(?P<body>.*?)(<!-- /table -->)", re.S)
OPTION = re.compile(r"\s+(\w+)=(\S+)")
OK = ("ok", "completed")


class SourceError(ValueError):
    """A marker names a file, section, table or column that is not there: the page must not keep a
    table whose source has gone."""


def parse(spec: str) -> tuple[str, str | None, dict[str, str | list[str]]]:
    """`path[#section] key=value ...` -> (path, section, options); `where` may repeat."""
    first = OPTION.search(spec)
    head, tail = (spec[:first.start()], spec[first.start():]) if first else (spec, "")
    path, _, section = head.strip().partition("#")
    options: dict[str, str | list[str]] = {"where": []}
    for key, value in OPTION.findall(tail):
        if key == "where":
            options["where"].append(value)
        else:
            options[key] = value
    return path, section or None, options


def section_lines(text: str, heading: str | None, source: str) -> list[str]:
    """The lines under `heading` up to the next heading of the same or a higher level (the whole file
    without a heading)."""
    lines = text.splitlines()
    if heading is None:
        return lines
    for i, line in enumerate(lines):
        m = re.match(r"(#+)\s+(.*?)\s*$", line)
        if m and m[2] == heading:
            level = len(m[1])
            end = next((j for j in range(i + 1, len(lines))
                        if (h := re.match(r"(#+)\s", lines[j])) and len(h[1]) <= level), len(lines))
            return lines[i + 1:end]
    raise SourceError(f"{source}: no heading '{heading}'")


def markdown_tables(lines: list[str]) -> list[list[str]]:
    """Each run of consecutive `|` lines."""
    tables, current = [], []
    for line in lines + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def from_markdown(path: Path, section: str | None, options: dict) -> list[str]:
    lines = section_lines(path.read_text(encoding="utf-8"), section, str(path))
    tables = markdown_tables(lines)
    n = int(options.get("table", 1))
    if not 1 <= n <= len(tables):
        raise SourceError(f"{path}{'#' + section if section else ''}: has {len(tables)} table(s), not a table {n}")
    out = list(tables[n - 1])
    if "grep" in options:  # the header, the rule, and the rows that mention the word
        out = out[:2] + [line for line in out[2:] if options["grep"] in line]
    if "notes" in options:
        own = lines[:next((i for i, line in enumerate(lines) if line.startswith("#")), len(lines))]
        notes = [line for line in own if line.startswith(options["notes"])]  # not a subsection's
        out += ["", *(f"- {line}" for line in notes)] if notes else []
    return out


def _number(text: str, spec: str | None) -> str:
    try:
        x = float(text)
    except ValueError:
        return text
    if spec:
        return format(x, spec)
    return f"{x:,.0f}" if x.is_integer() or abs(x) >= 100 else f"{x:,.3f}"


def _cell(row: dict, value: str, error: str | None, spec: str | None) -> str:
    status = row.get("status", "ok")
    if status not in OK:
        return status.split(":")[0].split()[0]
    text = _number(row[value], spec)
    return f"{text} ± {_number(row[error], spec.lstrip('+') if spec else None)}" if error else text


def _key(text: str):
    """Sort numbers as numbers, words as they first appear (stable)."""
    try:
        return (0, float(text))
    except ValueError:
        return (1, 0.0)


def from_csv(path: Path, options: dict) -> list[str]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    header = rows[0].keys() if rows else []
    for condition in options["where"]:
        column, _, allowed = condition.partition("=")
        if column not in header:
            raise SourceError(f"{path}: no column '{column}'")
        rows = [r for r in rows if r[column] in allowed.split("|")]
    wanted = [c for key in ("columns", "rows", "value", "error") if key in options for c in options[key].split(",")]
    missing = [c for c in wanted if c not in header]
    if missing or "columns" not in options:
        raise SourceError(f"{path}: no column {missing[0]!r}" if missing else f"{path}: a CSV table needs columns=")
    if not rows:
        raise SourceError(f"{path}: no row passes {' '.join(options['where'])}")
    spec = options.get("format")
    if "value" not in options:  # a listing
        columns = options["columns"].split(",")
        return table_lines(columns, ([_number(r[c], spec) for c in columns] for r in rows))
    keys, across = options["rows"].split(","), options["columns"]
    lines = list(dict.fromkeys(tuple(r[k] for k in keys) for r in rows))
    heads = sorted(dict.fromkeys(r[across] for r in rows), key=_key)
    cells = {}
    for r in rows:  # two rows in one cell: the later one would hide the earlier without a word
        cell = (tuple(r[k] for k in keys), r[across])
        if cell in cells:
            raise SourceError(f"{path}: two rows have {', '.join(cell[0])} and {across} = {cell[1]}; add a column "
                              f"that tells them apart to rows= (e.g. rows={','.join(keys)},run) or narrow where=")
        cells[cell] = r
    label = options.get("label", across)
    return table_lines([" / ".join(keys), *(h if label == "-" else f"{label} = {h}" for h in heads)],
                       ([", ".join(line), *(_cell(cells[line, h], options["value"], options.get("error"), spec)
                                            if (line, h) in cells else "–" for h in heads)] for line in lines),
                       align="l" + "r" * len(heads))


def render(spec: str, base: Path) -> str:
    """The block a marker's spec stands for: the table and a caption naming its source."""
    path, section, options = parse(spec)
    source = base / path
    if not source.is_file():
        raise SourceError(f"{source}: no such file")
    table = from_csv(source, options) if source.suffix == ".csv" else from_markdown(source, section, options)
    where = f", section “{section}”" if section else ""
    return "\n".join(table) + f"\n\n*Generated from [{path}]({path}){where} by `python -m seqbench.reports.pages`.*\n"


def rewrite(page: Path) -> str:
    """The page with every marked table made anew from its source."""
    text = frontier_join.rewrite(layer_bench_page.rewrite(page), page.parent)
    return BLOCK.sub(lambda m: m.group(1) + render(m["spec"], page.parent) + m.group(4), text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m seqbench.reports.pages", description=__doc__.split("\n\n")[0])
    p.add_argument("pages", type=Path, nargs="+")
    p.add_argument("--check", action="store_true", help="exit 1 if a page differs from its sources")
    args = p.parse_args(argv)
    stale = []
    for page in args.pages:
        new = rewrite(page)
        if new == page.read_text(encoding="utf-8"):
            continue
        if args.check:
            stale.append(page)
        else:
            page.write_text(new, encoding="utf-8")
    for page in stale:
        print(f"{page}: a generated table differs from its source; run python -m seqbench.reports.pages {page}",
              file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
