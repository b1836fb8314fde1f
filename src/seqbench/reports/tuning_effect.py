"""What tuning changed, per family and tier: each family's cell before tuning beside its cell after, on
the same data, each side's cell chosen by the verdict's rule (`seqbench.protocol.verdict`).

- PTB: the test split's loss of the checkpoint chosen on validation, on both sides;
- Tiny Shakespeare: the old runs selected and scored on the whole validation tenth (it had no held-out
  part); the final cells select on its first half and score on its second (`data.heldout_score`). The
  comparison is on the whole tenth: for a final cell the mean of its tested checkpoint's two halves
  (equal halves, 55,770 characters each; each half's evaluation starts its streams afresh, which the
  whole-tenth pass did once).

The difference is after minus before (negative: tuning helped), with Welch's 95 % interval where both
sides have two seeds or more (scipy's `ttest_ind(equal_var=False)`); with one seed on a side there is no
interval, and the table says so. The before side is `seqbench.reports.frontier_untuned.before_runs`, the after
side `seqbench.reports.frontier_tuned.after_runs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

from seqbench.compose import CONF_DIR
from seqbench.families import colour, order
from seqbench.protocol.verdict import cells, verdict
from seqbench.tables import table_lines
from seqbench.training.record import Run


def heldout_halves(experiment: str) -> bool:
    """Whether the tuning experiment selects on one half of the validation split and scores on the other."""
    return bool(OmegaConf.select(OmegaConf.load(CONF_DIR / "experiment" / f"{experiment}.yaml"), "data.heldout_score"))


def on_whole_split(run) -> Run:
    """A final run scored as the untuned runs were: on the whole validation split, the mean of its tested
    checkpoint's two equal halves (selection half: `val/loss_best`; score half: `test/loss`)."""
    m = run.metrics
    halves = (m.get("val/loss_best"), m.get("test/loss"))
    whole = sum(halves) / 2 if all(isinstance(h, (int, float)) for h in halves) else None
    return Run(run.name, run.family, {**m, "test/loss": whole})


@dataclass
class Change:
    tier: float
    family: str
    before: object | None  # seqbench.protocol.verdict.Cell
    after: object | None

    @property
    def difference(self) -> float | None:
        if self.before is None or self.after is None:
            return None
        return self.after.interval.mean - self.before.interval.mean

    @property
    def interval(self) -> tuple[float, float] | None:
        """Welch's 95 % interval of after - before over the seeds; None with one seed on a side."""
        from scipy import stats

        if self.before is None or self.after is None or min(len(self.before.score), len(self.after.score)) < 2:
            return None
        ci = stats.ttest_ind(self.after.score, self.before.score, equal_var=False).confidence_interval(0.95)
        return float(ci.low), float(ci.high)

    @property
    def call(self) -> str:
        if self.difference is None:
            return "–"
        if self.interval is None:
            return "no interval (1 seed)"
        low, high = self.interval
        return "better" if high < 0 else "worse" if low > 0 else "within the seeds' noise"


def changes(before: list, after: list) -> list[Change]:
    """Per tier that either side ran, per family: each side's cell by the verdict's rule."""
    old, new = cells(before), cells(after)
    out = []
    for tier in sorted({c.budget for c in old + new}):
        v_old, v_new = verdict(old, tier).entries, verdict(new, tier).entries
        for family in order(set(v_old) | set(v_new)):
            out.append(Change(tier, family, v_old.get(family), v_new.get(family)))
    return out


def _cell(c) -> str:
    if c is None:
        return "–"
    i = c.interval
    sd = f" ± {i.sd:.3f}" if i.sd is not None else ""
    return f"{i.mean:.3f}{sd} ({c.params / 1e6:.2g}M, n={i.n})"


def effect_markdown(found: list[Change], data: str) -> str:
    lines = table_lines(["budget (FLOPs)", "family", "before tuning", "after tuning", "after − before", "95 % interval",
                         None], ([f"{ch.tier:.0e}", ch.family, _cell(ch.before), _cell(ch.after),
                                  "–" if ch.difference is None else f"{ch.difference:+.3f}",
                                  "–" if ch.interval is None else f"[{ch.interval[0]:+.3f}, {ch.interval[1]:+.3f}]", ch.call]
                                 for ch in found))
    lines += ["", f"Loss in nats per token on {data}, mean ± sd over the seeds of each side's cell (non-embedding "
              "parameters, seeds); each side's cell is the family's size with the most seeds and the lowest mean "
              "selection loss at that tier. After − before < 0: tuning helped. The interval is Welch's over the "
              "two sides' seeds; with one seed on a side there is none: read such a difference against the seed sds "
              "beside it."]
    return "\n".join(lines)


def plot_effect(found: list[Change], data: str, path: Path) -> Path:
    """One panel per family, its loss against the budget before tuning (dashed, open markers) and after
    (solid, filled), mean over seeds with ± sd bars where a side has two seeds or more: the effect table
    as one picture, the panels on one loss scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    families = order({ch.family for ch in found})
    cols = min(4, len(families))
    rows = -(-len(families) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.6 * cols, 2.4 * rows + 0.6), dpi=100, sharex=True, sharey=True,
                             squeeze=False)
    for i, (ax, family) in enumerate(zip(axes.flat, families)):
        color = colour(family, f"C{i}")
        for side, style, fill in (("before", "--", "none"), ("after", "-", color)):
            points = [(ch.tier, getattr(ch, side).interval) for ch in found
                      if ch.family == family and getattr(ch, side) is not None]
            if points:
                xs, iv = zip(*points)
                ax.errorbar(xs, [i.mean for i in iv], yerr=[i.sd or 0 for i in iv], color=color, linestyle=style,
                            marker="o", markerfacecolor=fill, capsize=2, linewidth=1.2, label=side)
        ax.set_title(family, fontsize=10)
        ax.set_xscale("log")
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes.flat[len(families):]:
        ax.axis("off")
    from matplotlib.lines import Line2D

    keys = [Line2D([], [], color="grey", linestyle="--", marker="o", markerfacecolor="none", label="before tuning"),
            Line2D([], [], color="grey", linestyle="-", marker="o", label="after tuning")]
    fig.legend(handles=keys, loc="upper right", fontsize=8, ncol=2)  # every panel's key, whichever sides it has
    fig.supxlabel("training FLOPs (budget tier)", fontsize=10)
    fig.supylabel(f"loss (nats per token), {data.split(' (')[0]}", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path)
    plt.close(fig)
    return path


def effect_rows(found: list[Change]) -> list[dict]:
    rows = []
    for ch in found:
        row = {"budget": f"{ch.tier:.0e}", "family": ch.family}
        for side, c in (("before", ch.before), ("after", ch.after)):
            i = c.interval if c is not None else None
            row |= {f"{side}_params": c.params if c else "", f"{side}_n": i.n if i else "",
                    f"{side}_mean": f"{i.mean:.4f}" if i else "", f"{side}_sd": f"{i.sd:.4f}" if i and i.sd else ""}
        ci = ch.interval
        row |= {"difference": "" if ch.difference is None else f"{ch.difference:.4f}",
                "low": f"{ci[0]:.4f}" if ci else "", "high": f"{ci[1]:.4f}" if ci else "", "call": ch.call}
        rows.append(row)
    return rows
