"""The comparison report's plots (`seqbench.reports.report`): validation perplexity against a curve key, one
line per run and one colour per family, and the best perplexity against non-embedding parameters."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from seqbench.families import colour
from seqbench.tables import mean_std

if TYPE_CHECKING:
    from seqbench.training.record import Run


def plot_curves(groups: dict[str, list[Run]], x_key: str, xlabel: str, path: Path) -> Path:
    """Validation perplexity against `x_key`, one line per run, one colour per family."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    for i, (name, rs) in enumerate(sorted(groups.items())):
        color = colour(name, f"C{i}")
        for j, run in enumerate(rs):
            points = [(row[x_key], row["val/ppl"]) for row in run.curve if row.get(x_key) is not None]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, color=color, marker="o", markersize=3, linewidth=1.2,
                        label=name if j == 0 else None)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("validation perplexity")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def plot_params(groups: dict[str, list[Run]], path: Path) -> Path:
    """Each family's best validation perplexity (mean ± sd over its runs) against its non-embedding parameters."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    for i, (name, rs) in enumerate(sorted(groups.items())):
        params = mean_std([r.metrics.get("params_non_embedding") for r in rs])[0]
        ppl, std = mean_std([r.best_val_ppl() for r in rs])
        if params and ppl:
            ax.errorbar([params], [ppl], yerr=[std or 0.0], fmt="o", color=colour(name, f"C{i}"), capsize=3, label=name)
            ax.annotate(name, (params, ppl), textcoords="offset points", xytext=(5, 5))
    ax.set_xscale("log")
    ax.set_xlabel("parameters without embeddings")
    ax.set_ylabel("best validation perplexity (mean ± sd)")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
