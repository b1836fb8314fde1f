"""IsoFLOP profiles from the final cells' runs, and the sizes each profile still needs (issue 64, item 1).

A profile is one family at one tier over several sizes (`seqbench.protocol.scaling_laws`). The size step
runs the frontier's first grid (its experiment's `size:` values); the profile step then grows each profile
along the presets' whole ladder (their `sizes` table, xxs to xl) by `scaling_laws.sizes_to_add`: past the
edge a valley runs off, and on to five sizes spanning 8x. A size whose run would read its training text more
than `DATA_LIMIT` times is not trained: its point would measure repetition, and the profile is reported
**data-limited** instead of unbracketed (`plan`). The passes a size would read are predicted from its FLOPs
per token, known from any run of that family at that size, else extrapolated geometrically along the ladder
from the two nearest sizes it has run (the widths double from size to size; the prediction only decides what
not to train).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from seqbench.protocol import scaling_laws as sl
from seqbench.protocol.final_cells import size_of
from seqbench.protocol.verdict import selection_loss

TRAIN_TOKENS = "data/train_tokens"  # written by the run (seqbench.training.run); counted from the corpus for older runs


@cache
def _corpus_tokens(data_yaml: str) -> int:
    """The training split's tokens of a corpus configuration, from its DataModule (set up once)."""
    import hydra
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"paths": {"data_dir": os.environ.get("SEQBENCH_DATA_DIR", "data")}, "seed": 0,
                            "data": OmegaConf.create(data_yaml)})
    module = hydra.utils.instantiate(cfg.data)
    module.prepare_data()
    module.setup("fit")
    return int(module.num_tokens("train"))


def train_tokens(run) -> int:
    """The run's training split in tokens: its record's `data/train_tokens`, else counted from its corpus."""
    if run.metrics.get(TRAIN_TOKENS):
        return int(run.metrics[TRAIN_TOKENS])
    from omegaconf import OmegaConf
    return _corpus_tokens(OmegaConf.to_yaml(OmegaConf.create(run.config["data"])))


def points_of(runs, budgets: Sequence[float] | None = None) -> list[sl.Point]:
    """One `Point` per (family, budget, size) of the completed `runs` (at `budgets`; all by default), its
    seeds' selection losses together; passes = tokens trained / the corpus's training tokens."""
    cells: dict[tuple[str, float, str], dict] = {}
    for run in runs:
        budget, size = run.metrics.get("budget/flops"), size_of(run)
        loss = None if run.failed else selection_loss(run)
        if budget is None or size is None or loss is None or not math.isfinite(loss):
            continue
        if budgets is not None and float(budget) not in budgets:
            continue
        cell = cells.setdefault((run.family, float(budget), size), {"losses": {}, "run": run})
        cell["losses"][run.seed] = float(loss)
    points = []
    for (family, budget, size), cell in sorted(cells.items()):
        m = cell["run"].metrics
        points.append(sl.Point(family, budget, size, float(m["flops_per_token"]), float(m.get("params_non_embedding") or 0),
                               tuple(cell["losses"][s] for s in sorted(cell["losses"], key=str)),
                               float(m.get("curve/tokens") or 0) / train_tokens(cell["run"])))
    return points


def flops_per_token(points: Sequence[sl.Point], ladder: Sequence[str]) -> dict[str, float]:
    """Each ladder size's FLOPs per token for one family: measured where any of its `points` (any tier) ran
    that size, else extrapolated geometrically from the two nearest measured sizes (empty with fewer than two)."""
    known = {p.size: p.flops_per_token for p in points}
    idx = sorted(ladder.index(s) for s in known if s in ladder)
    if len(idx) < 2:
        return {s: known[s] for s in known if s in ladder}
    out = {}
    for i, size in enumerate(ladder):
        if size in known:
            out[size] = known[size]
            continue
        a, b = sorted(idx, key=lambda j: (abs(j - i), j))[:2]
        ratio = (known[ladder[b]] / known[ladder[a]]) ** (1 / (b - a))
        out[size] = known[ladder[a]] * ratio ** (i - a)
    return out


@dataclass(frozen=True)
class Next:
    """What a profile needs next: a size to train, or none and why (`done`, `end of ladder`, or
    `data-limited`: the size it needs would read more than `DATA_LIMIT` passes)."""

    size: str | None
    why: str
    passes: float = math.nan   # the predicted passes of the size asked for


def plan(profile: Sequence[sl.Point], family_points: Sequence[sl.Point], ladder: Sequence[str], tokens: int) -> Next:
    """The next size of one profile (`profile`: one family at one tier) along `ladder`, or why none:
    `family_points` (the family's points at every tier) give each size's FLOPs per token; `tokens` the
    corpus's training tokens."""
    wanted = sl.sizes_to_add(profile, ladder)
    if not wanted:
        ran = {p.size for p in profile}
        found = sl.optimum(profile)
        end = found.status == sl.UNBRACKETED
        return Next(None, "end of ladder" if end and ran else "done")
    size, budget = wanted[0], profile[0].budget
    f = flops_per_token(family_points, ladder).get(size)
    passes = budget / (f * tokens) if f else math.nan
    if math.isfinite(passes) and passes > sl.DATA_LIMIT:
        return Next(None, "data-limited", passes)
    return Next(size, "to run", passes)
