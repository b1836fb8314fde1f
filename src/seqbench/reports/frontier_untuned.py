"""The untuned frontier's committed records as runs with their budget tier: the "before" side of
`seqbench.reports.tuning_effect`.

The records (`experiments/figures/frontier-*/runs.csv`, written by `seqbench.reports.report`) predate runs that
record their budget. A run's tier is its place in its sweep, Hydra's product of family x size x tier with
the tier varying fastest (`LAYOUT`, each sweep's tiers from the command in its record). `before_runs`
checks that place against the record: every block of consecutive jobs one tier list long must hold one
family at one size, with the wall time growing with the tier; a record that does not fit stops the command
instead of giving a run another tier's budget.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from seqbench.training.record import (
    Run,  # what seqbench.protocol.verdict.cells reads: name, family, metrics, curve
)

# The untuned frontier's sweeps, by the name their jobs carry in the records' `run` column: the tiers each
# swept, in the order of its `budget.flops` (the experiment's list, or the tiers given), and its seed. The
# first four from the commands in experiments/figures/frontier-{shakespeare,ptb}/record.json; the parallel
# recurrences' records name only their sweep folders, whose names say the tiers, and their own reports
# (written when runs recorded their budget) hold a verdict table the rebuilt tiers reproduce
# (tests/test_frontier_tuned.py). A one-tier sweep has nothing to check but its name.
LAYOUT: dict[str, tuple[tuple[float, ...], int]] = {
    "frontier_shakespeare_s1234": ((1e11, 1e12, 1e13), 1234),   # experiment=frontier
    "frontier_shakespeare_s2": ((1e11,), 2),                    # budget.flops=1e11 seed=2
    "frontier_ptb_s1234": ((1e12, 3e12, 1e13), 1234),           # experiment=frontier_ptb
    "frontier_ptb_s2": ((1e12,), 2),                            # budget.flops=1e12 seed=2
    "frontier_sh_par_low": ((1e11, 1e12), 1234),                # budget.flops=1e11,1e12
    "frontier_sh_par_low_seed2": ((1e11,), 2),
    "frontier_sh_par_1e13_s": ((1e13,), 1234),                  # size=s budget.flops=1e13
    "frontier_ptb_par_1e12": ((1e12,), 1234),
}


class LayoutError(ValueError):
    """A committed record's jobs do not fall in the blocks its sweep's layout says: its tiers cannot be read."""


def _job(run: str) -> tuple[str, int]:
    sweep, _, job = run.partition("/")
    return sweep, int(job)


def _log(ppl: str) -> float | None:
    return math.log(float(ppl)) if ppl else None  # a failed run's record leaves its perplexities empty


def before_runs(path: Path) -> list[Run]:
    """The runs of an untuned frontier record (`runs.csv` of `seqbench.reports.report`) with their budget tier and
    seed from `LAYOUT`, checked against the record (see the module's docstring)."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    by_sweep: dict[str, dict[int, dict]] = {}
    for row in rows:
        sweep, job = _job(row["run"])
        if sweep not in LAYOUT:
            raise LayoutError(f"{path}: no layout for sweep {sweep!r} (seqbench.reports.frontier_untuned.LAYOUT)")
        by_sweep.setdefault(sweep, {})[job] = row
    out = []
    for sweep, jobs in by_sweep.items():
        tiers, seed = LAYOUT[sweep]
        if sorted(jobs) != list(range(len(jobs))) or len(jobs) % len(tiers):
            raise LayoutError(f"{path}: sweep {sweep} has jobs {sorted(jobs)}, not whole blocks of {len(tiers)} tiers")
        for start in range(0, len(jobs), len(tiers)):
            block = [jobs[start + i] for i in range(len(tiers))]
            if len({(r["family"], r["params_non_embedding"]) for r in block}) != 1:
                raise LayoutError(f"{path}: jobs {start}-{start + len(tiers) - 1} of {sweep} are not one family at one "
                                  "size: the tier is not the sweep's fastest axis")
            walls = [float(r["wall_time_s"]) for r in block if r["status"] == "completed" and r["wall_time_s"]]
            if any(b <= a for a, b in zip(walls, walls[1:])):  # a failed job's short time proves nothing
                raise LayoutError(f"{path}: the wall times of {sweep} jobs {start}-{start + len(tiers) - 1} ({walls}) "
                                  f"do not grow with the tiers {tiers}")
            for tier, row in zip(tiers, block):
                metrics = {"status": row["status"], "budget/flops": tier, "seed": seed,
                           "params_non_embedding": int(row["params_non_embedding"]),
                           "val/loss_best": _log(row["best_val_ppl"]), "test/loss": _log(row["test_ppl"])}
                out.append(Run(row["run"], row["family"], metrics))
    return out
