"""The experiment pages' result tables are their generated sources' (seqbench.reports.pages), and the
renderer picks the section, table, rows and cells a marker names."""

from __future__ import annotations

import pytest

from conftest import ROOT
from seqbench.reports.pages import SourceError, main, render

PAGES = sorted((ROOT / "experiments").glob("*.md"))
REPORT = """# Frontier: X

| family | valid ppl |
|---|---|
| gru 0.2M @ 1e+13 | 4.8 |
| rnn 0.05M @ 1e+11 | 22.4 |

## Compute-efficient frontier

| budget | gru | winner |
|---|---|---|
| 1e11 | 2.9 | gru |

Crossover: gru overtakes rnn at 5e12.

### The same runs against training time

| time | gru | winner |
|---|---|---|
| 10 | 2.1 | gru |

Crossover: gru overtakes rnn at 155 s.
"""
BENCH = """family,batch,length,status,tokens_per_s,se
lstm,8,64,ok,8113.2,1.5
gpt,8,64,ok,9269.0,2.25
lstm,8,4096,ok,6360.4,0.5
gpt,8,4096,skipped: T=2048 already took 10.4 s,,
lstm,1,64,ok,4056.0,0.1
"""


@pytest.fixture
def sources(tmp_path):
    (tmp_path / "report.md").write_text(REPORT)
    (tmp_path / "bench.csv").write_text(BENCH)
    return tmp_path


def test_every_committed_page_is_what_its_sources_make():
    assert main([str(p) for p in PAGES] + ["--check"]) == 0, "run: python -m seqbench.reports.pages experiments/*.md"


def test_the_pages_mark_the_tables_the_issue_names():
    """Issue 37's tables come from their sources: a page that goes back to typing them fails here."""
    marked = {p.name: p.read_text(encoding="utf-8").count("<!-- table: ") for p in PAGES}
    for name, least in {"frontier.md": 6, "long-range.md": 8, "context-usage.md": 6, "throughput.md": 5,
                        "model-size.md": 1, "tuning-protocol.md": 4}.items():
        assert marked[name] >= least, f"{name}: {marked[name]} generated tables"


def test_a_section_ends_at_its_subsection_and_keeps_its_own_notes(sources):
    text = render("report.md#Compute-efficient frontier notes=Crossover", sources)
    assert "| 1e11 | 2.9 | gru |" in text and "- Crossover: gru overtakes rnn at 5e12." in text
    assert "155 s" not in text and "| 10 | 2.1 |" not in text  # the subsection's table and note
    sub = render("report.md#The same runs against training time", sources)
    assert "| 10 | 2.1 | gru |" in sub and "1e11" not in sub


def test_table_and_grep_pick_one_table_and_its_rows(sources):
    text = render("report.md grep=1e+11", sources)
    assert "| family | valid ppl |" in text and "| rnn 0.05M @ 1e+11 | 22.4 |" in text
    assert "1e+13" not in text
    assert "| budget | gru | winner |" in render("report.md table=2", sources)


def test_a_pivot_puts_each_rows_value_in_its_own_cell(sources):
    text = render("bench.csv rows=length columns=family label=- value=tokens_per_s where=batch=8 format=,.0f",
                  sources)
    lines = text.splitlines()
    assert lines[0] == "| length | lstm | gpt |"
    assert "| 64 | 8,113 | 9,269 |" in lines  # batch 1's 4,056 is not taken for batch 8's cell
    assert "| 4096 | 6,360 | skipped |" in lines
    errors = render("bench.csv rows=family columns=length value=tokens_per_s error=se where=batch=8 format=,.1f",
                    sources)
    assert "| lstm | 8,113.2 ± 1.5 | 6,360.4 ± 0.5 |" in errors


def test_a_listing_keeps_the_chosen_columns_in_order(sources):
    text = render("bench.csv columns=length,family where=batch=1", sources)
    assert text.splitlines()[:3] == ["| length | family |", "|---|---|", "| 64 | lstm |"]


@pytest.mark.parametrize("spec, says", [
    ("gone.md", "no such file"),
    ("report.md#No such heading", "no heading 'No such heading'"),
    ("report.md table=4", "has 3 table(s), not a table 4"),
    ("bench.csv rows=length columns=family value=tokens", "no column 'tokens'"),
    ("bench.csv columns=family where=batch=16", "no row passes batch=16"),
    # batch 8 and batch 1 both have an lstm row at length 64: one would silently replace the other
    ("bench.csv rows=family columns=length value=tokens_per_s", "two rows have lstm and length = 64"),
])
def test_a_marker_whose_source_is_gone_fails_by_name(sources, spec, says):
    with pytest.raises(SourceError, match=says.replace("(", r"\(").replace(")", r"\)")):
        render(spec, sources)
