"""The search's grid as a picture: one small heatmap per family of the selection loss over the
learning-rate factor x tokens per step (a probe's search: x the gap T), one colour scale per corpus (so
families compare by colour), the best cell outlined (a probe's: the column of the rate chosen by its
mean over the gaps), and the cells without a loss lettered: r (running), f (failed), d (diverged),
blank (not started)."""

from __future__ import annotations

import math
from pathlib import Path

from seqbench.protocol.tuning_search import Search
from seqbench.tables import loss_text

MARK = {"running": "r", "failed": "f", "diverged": "d"}
COLUMNS = 4  # heatmaps per row
SPAN = 1.0  # nats above the corpus's best loss that the colour scale spans; worse cells take its top colour


def _rows(search: Search) -> tuple[str, list, str]:
    """The heatmap's row axis: tokens per step where the search set them, else the probe's gaps; the
    Trial field each row reads, and the axis label."""
    if search.tokens_axis or not search.gaps:
        return "tokens_grid", search.tokens_axis, "tokens per step"
    return "gap", search.gaps, "gap T"


def _cells(search: Search) -> tuple[list[list[float]], dict[tuple[int, int], str]]:
    """Loss per (row, lr column), NaN where none; the letter of a cell without a loss."""
    field, rows, _ = _rows(search)
    lrs = search.lr_axis
    grid = [[math.nan] * len(lrs) for _ in rows]
    letters: dict[tuple[int, int], str] = {}
    for t in search.trials:
        if t.lr_scale not in lrs or getattr(t, field) not in rows:
            continue
        i, j = rows.index(getattr(t, field)), lrs.index(t.lr_scale)
        if t.candidate and (math.isnan(grid[i][j]) or t.loss < grid[i][j]):
            grid[i][j] = t.loss
            letters.pop((i, j), None)
        elif math.isnan(grid[i][j]):
            letters[(i, j)] = MARK.get(t.status, "?")
    return grid, letters


def _label(loss: float) -> str:
    return loss_text(loss, decimals=2)  # a solved probe's 0.0002 as 2e-04, not 0.00


def plot(found: list[Search], corpus: str, path: Path) -> Path:
    """One row of heatmaps, one per family search of `corpus`; the loss scale is the corpus's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    mine = [s for s in found if s.corpus == corpus and s.lr_axis and _rows(s)[1]]
    losses = [t.loss for s in mine for t in s.candidates]
    low, worst = (min(losses), max(losses)) if losses else (0.0, 1.0)
    # a diverged corner would otherwise wash out the differences that decide; a probe's losses run from
    # solved (~0) to learning nothing (log 8 on copy), and that whole span is what its picture must show
    high = worst if any(s.gaps for s in mine) else min(worst, low + SPAN)
    cols = min(COLUMNS, max(1, len(mine)))
    rows = max(1, math.ceil(len(mine) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(2.4 * cols + 1.0, 2.4 * rows + 0.5), dpi=100, squeeze=False)
    flat = list(axes.flat)
    image = None
    for ax, search in zip(flat, mine):
        grid, letters = _cells(search)
        image = ax.imshow(np.ma.masked_invalid(np.array(grid)), origin="lower", cmap="viridis_r", vmin=low,
                          vmax=high, aspect="auto")
        for (i, j), letter in letters.items():
            ax.text(j, i, letter, ha="center", va="center", fontsize=8, color="grey")
        field, row_axis, row_label = _rows(search)
        best = search.best
        if best is not None:
            j = search.lr_axis.index(best.lr_scale)
            if field == "gap":  # one rate for every gap: its whole column, its mean loss above it
                ax.add_patch(plt.Rectangle((j - 0.5, -0.5), 1, len(row_axis), fill=False, edgecolor="red", linewidth=2))
                ax.text(j, len(row_axis) - 0.5, _label(best.loss), ha="center", va="bottom", fontsize=7)
            else:
                i = row_axis.index(best.tokens_grid)
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=2))
                ax.text(j, i, _label(best.loss), ha="center", va="center", fontsize=7, color="black")
        ax.set_xticks(range(len(search.lr_axis)), [f"{v:.3g}" for v in search.lr_axis], fontsize=7)
        ax.set_yticks(range(len(row_axis)), [str(v) for v in row_axis], fontsize=7)
        ax.set_xlabel("lr x recipe", fontsize=8)
        ax.set_title(search.family, fontsize=9)
        ax.set_ylabel(row_label, fontsize=8)
    for ax in flat[len(mine):]:
        ax.axis("off")
    fig.tight_layout(rect=(0, 0, 0.9, 0.93))
    if image is not None:
        selected = mine[0].selected_on or "validation"
        bar = fig.colorbar(image, cax=fig.add_axes((0.92, 0.15, 0.015, 0.7)),
                           extend="max" if worst > high else "neither")
        bar.set_label(f"best loss ({selected})", fontsize=8)
    fig.suptitle(f"{corpus}: the search's grid (red box: best; r running, f failed, d diverged, blank not started)",
                 fontsize=9)
    fig.savefig(path, bbox_inches="tight")
    plt.close(fig)
    return path
