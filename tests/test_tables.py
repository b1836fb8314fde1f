"""The one Markdown table writer (`seqbench.tables`) every page and record writes its tables with."""

from __future__ import annotations

from seqbench.tables import loss_text, mean_std, table, table_lines, table_row


def test_a_table_is_its_header_its_rule_and_a_line_per_row():
    # bugs caught: an empty value written one space wide (the committed pages pad it: `|  |`), a blank header
    # cell written as "None", the right alignment lost or given to the wrong column, a row's cells not str()'d
    assert table(["family", "loss", None], [["gru", 1.5, ""], ["lstm", 2, "x"]], align="lr") == (
        "| family | loss | |\n"
        "|---|---:|---|\n"
        "| gru | 1.5 |  |\n"
        "| lstm | 2 | x |")
    assert table_lines(["a"]) == ["| a |", "|---|"]
    assert table_row(["a", None, ""]) == "| a | |  |"


def test_numbers_are_written_as_every_page_writes_them():
    assert loss_text(1.23456) == "1.235" and loss_text(0.0002) == "2.0e-04" and loss_text(0) == "0.000"
    assert mean_std([1.0, 3.0, float("nan"), None]) == (2.0, 2 ** 0.5) and mean_std([4.0]) == (4.0, None)
    assert mean_std([]) == (None, None)
