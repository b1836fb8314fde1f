"""The one rule for writing a loss (seqbench.tables), which the tuning tables, their heatmaps
and the long-range tables share."""

from seqbench.tables import loss_text


def test_a_solved_probe_s_loss_keeps_its_digits_and_an_ordinary_loss_its_decimals():
    """Fails if a loss below 0.01 is written with fixed decimals (0.0002 as 0.000, read as exactly
    zero), or if the table's three decimals and the heatmap's two part ways."""
    assert loss_text(0.000213) == "2.1e-04"
    assert loss_text(0.000213, decimals=2) == "2e-04"
    assert loss_text(1.23456) == "1.235" and loss_text(1.23456, decimals=2) == "1.23"
    assert loss_text(0.0) == "0.000" and loss_text(0.01) == "0.010"
    assert loss_text(-0.004) == "-4.0e-03"  # a gain below 0.01 nats is not -0.000
