"""docs/results.md, the long results table the README links to, is what `seqbench.reports.results` writes from
its rows and the ledger's records (as experiments/findings.md is the findings generator's), never typed."""

from __future__ import annotations

from conftest import ROOT
from seqbench.reports.results import PAGE, ROWS, TYPED, main, render


def test_the_committed_results_page_is_the_generators_output():
    # bugs caught: a row's number typed into the page (or edited there) instead of read from its record; a
    # record that changed without the page being written again; a row read from the wrong record or column
    assert (ROOT / PAGE).read_text(encoding="utf-8") == render(ROOT), "run: python -m seqbench.reports.results"
    assert main(["--check"]) == 0


def test_a_row_read_from_records_links_each_number_to_its_file_and_names_the_records():
    # bugs caught: a recorded row printing bare numbers (no way to tell where they came from), or named as typed
    text = render(ROOT)
    recorded = [row for row in ROWS if callable(row.result)]
    assert recorded, "no row reads its numbers from a record"
    lines = {line.split(" | ")[0][2:]: line for line in text.splitlines() if line.startswith("| ")}
    for row in recorded:
        line = lines[row.question]
        assert "](../experiments/" in line.split(" | ")[2] and not line.rstrip(" |").endswith(TYPED), line[:200]
