"""How a loss is written in the tables and plot labels: fixed decimals, except below 0.01, where a solved
probe's loss (0.0002) would print as 0.000 and read as exactly zero; there, the same number of significant
digits in scientific notation (2.0e-04). One rule for every report, so a table and its heatmap agree."""

from __future__ import annotations


def loss_text(value: float, decimals: int = 3) -> str:
    """`value` with `decimals` decimals, or `decimals - 2` significant decimals in e-notation below 0.01."""
    if abs(value) >= 0.01 or value == 0:
        return f"{value:.{decimals}f}"
    return f"{value:.{max(decimals - 2, 0)}e}"
