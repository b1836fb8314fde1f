"""What `seqbench.analysis.context_usage` writes: every number as CSV, one plot per corpus, and the
table of effective context for the page. Kept apart from the measurement so that reading the
measurement does not mean reading matplotlib, and the page's layout can change without touching it.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import TYPE_CHECKING

from seqbench.tables import table_lines
from seqbench.training.record import METRICS

if TYPE_CHECKING:  # the measured models; imported only for the annotations (no import cycle at run time)
    from seqbench.analysis.context_usage import LM


def write_csv(lms: list[LM], path: Path, n_targets: dict) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["corpus", "family", "run", "measure", "x", "loss", "delta", "se", "targets"])
        for lm in lms:
            r, n = lm.results, n_targets[lm.corpus]
            w.writerow([lm.corpus, lm.family, lm.name, "full", "", f"{r['full']:.5f}", "", "", n])
            for c in r["curve"]:
                w.writerow([lm.corpus, lm.family, lm.name, "prefix", c["k"], f"{c['loss']:.5f}", f"{c['delta']:.5f}",
                            f"{c['se']:.5f}", n])
            w.writerow([lm.corpus, lm.family, lm.name, "intact", "", f"{r['intact']:.5f}", "", "", n])
            for kind, rows in r["perturbed"].items():
                for row in rows:
                    w.writerow([lm.corpus, lm.family, lm.name, kind, row["d"], f"{row['loss']:.5f}",
                                f"{row['delta']:.5f}", f"{row['se']:.5f}", n])


def plot_corpus(corpus: str, lms: list[LM], path: Path, n: int, prefix: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, lm in enumerate(lms):
        c, r = colors[i % len(colors)], lm.results
        label = lm.family if sum(o.family == lm.family for o in lms) == 1 else f"{lm.family} ({lm.name})"
        left.plot([p["k"] for p in r["curve"]], [p["loss"] for p in r["curve"]], "o-", color=c, label=label, ms=3)
        left.axhline(r["full"], color=c, ls=":", lw=1)
        for kind, style in (("shuffle", "o-"), ("replace", "s--")):
            rows = r["perturbed"][kind]
            right.plot([p["d"] for p in rows], [p["delta"] for p in rows], style, color=c, ms=3,
                       label=f"{label}, {kind}")
    left.set_xscale("log")
    left.set_xlabel("tokens of context k (read from nothing before them)")
    left.set_ylabel("mean loss (nats per token)")
    left.set_title(f"{corpus}: loss against context (dotted: full context)", fontsize=10)
    right.set_xscale("log")
    right.axhline(0, color="grey", lw=0.8)
    right.set_xlabel("d: tokens left intact before the target")
    right.set_ylabel("loss increase (nats)")
    right.set_title(f"{corpus}: tokens farther than d shuffled / replaced ({prefix}-token prefix)", fontsize=10)
    for ax in (left, right):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(f"{n} sampled targets", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(lms: list[LM], n_targets: dict, split: str, prefix: int) -> str:
    def fmt(x: int | None, top: int | None) -> str:
        return f"> {top}" if x is None else str(x)

    rows = []
    for lm in lms:
        r = lm.results
        at = {c["k"]: c["loss"] for c in r["curve"]}
        ks = " / ".join(f"{at[k]:.3f}" if k in at else "–" for k in (1, 10, 100))
        top_k = max(at) if at else None
        ds = [row["d"] for row in r["perturbed"]["shuffle"]]
        top_d = max(ds) if ds else None
        ordinary = f"{lm.test_loss:.3f}" if lm.test_loss is not None else "–"
        rows.append([lm.corpus, lm.family, lm.name, lm.window, n_targets[lm.corpus],
                     f"{r['full']:.3f} ({math.exp(r['full']):.1f})", ordinary, fmt(r["effective_context"], top_k), ks,
                     fmt(r["order_range"], top_d), fmt(r["identity_range"], top_d)])
    head = ["corpus", "family", "run", "trained window", "targets", "full-context loss (ppl)", "ordinary test loss",
            "effective context (k within 1 %)", "loss at k = 1 / 10 / 100", "shuffle harmless from d",
            "replace harmless from d"]
    lines = [f"Context usage on the {split} split; nats per token, mean over the sampled targets.", "",
             *table_lines(head, rows, align="lllrrrrrrrr")]
    lines += ["", "Trained window: the tokens of one training row (attention: the context; recurrent: the BPTT length). "
              f"Full context: recurrent, the state carried from the split's first token; attention, the model's "
              f"trained context. Perturbations read a {prefix}-token prefix (attention: its last `context` tokens); "
              "'harmless from d': the smallest d at which the loss increase is at most 1 % of the intact-prefix "
              f"loss. Ordinary test loss: the run's {METRICS} (its own evaluation protocol)."]
    return "\n".join(lines) + "\n"
