"""The tuning protocol's final cells as ready-to-run sweeps: `python -m seqbench.protocol.final_cells ...`.

The verdict (`seqbench.protocol.verdict`) needs ≥ 3 seeds on the cell each family is judged by at each budget
tier, and running every (family, size, tier) three times would pay for cells the verdict never reads.
So (experiments/tuning-protocol.md, "Final cells"):

1. **Size selection:** at every tier, each family's sizes of the frontier's grid (`Experiment.grid`) run
   once (the config's seed, 1234) with the family's tuned setting (`tune.per_family`, the search's best:
   `seqbench.protocol.tuning.per_family`); test on, 10 validations, so that each run is also the first
   seed of its cell. The profile step then adds sizes of the presets' ladder one at a time where a
   profile's valley runs off the grid (`seqbench.protocol.profiles`), in sweeps `<name>_sizes_profile_*`
   that the seeds read with the rest.
2. **Seeds:** at each tier, the size whose run has the lowest *selection* loss (`verdict.selection_loss`:
   the best validation loss, on the selection half; never the score, never another tier's, never a
   failed run's) is the family's cell there, and only that size gets seeds 2 and 3: one sweep per tier,
   each family at its own size through `tune.per_family.<family>.size`.

Everything the commands hold is read, not typed: the families and the best settings from the search's
runs, the sizes from the frontier presets' `sizes` tables, the tiers from the size-selection runs (or,
before them, from the frontier experiment the tuning experiment belongs to: `tune_frontier` ->
`frontier`), the first seed from `conf/train.yaml`.

    python -m seqbench.protocol.final_cells outputs/sweeps/tune_frontier                 # the size-selection sweeps
    python -m seqbench.protocol.final_cells outputs/sweeps/tune_frontier \\
        --sizes outputs/sweeps/frontier_tuned_sizes*                              # one seeds sweep per tier
"""

from __future__ import annotations

import argparse
import math
import re
import shlex
import sys
from pathlib import Path

from omegaconf import OmegaConf

from seqbench.compose import CONF_DIR
from seqbench.entry import register_resolvers
from seqbench.families import order
from seqbench.protocol.transfer_check import same_setting, setting_at
from seqbench.protocol.tuning import per_family, summary
from seqbench.protocol.tuning_trials import status_of
from seqbench.protocol.verdict import selection_loss
from seqbench.training.record import read_runs

# what every final run sets: the held-out score, the curves, and no grid (per_family sets each family's)
FINAL = ("test=true", "budget.evals=10", "tune.lr_scale=1", "tune.tokens_per_step=null")
# the seeds a chosen cell gets (issue 36): three at the frontier's tiers and three at the tier beyond
# (`Chain.top`). The tier beyond planned two until 2026-12-06, decided again before its second seed was read:
# two seeds give a 95 % t-interval of ±9 sd (t(1) = 12.7 over √2), so no gap of that tier could ever be
# called, whatever the runs said; three give ±2.5 sd, as at the frontier's tiers.
SEEDS, TOP_SEEDS = 3, 3


def planned_seeds(budget: float, tiers) -> int:
    """The seeds the protocol gives the chosen cell at `budget`: a tier above the frontier's `tiers` is the
    tier beyond, which runs `TOP_SEEDS`; the frontier's own run `SEEDS`. A cell is complete at this many."""
    return TOP_SEEDS if budget > max(tiers) else SEEDS


def size_of(run) -> str | None:
    """The size a run trained at: `tune/size` where recorded, else its `size=` override."""
    if run.metrics.get("tune/size"):
        return str(run.metrics["tune/size"])
    found = re.search(r"(?:^|\s)\+*size=(\S+)", run.metrics.get("overrides") or "")
    return found.group(1) if found else None


def chosen_sizes(runs, setting=None) -> dict[tuple[str, float], str]:
    """(family, budget tier) -> the size whose completed run has the lowest selection loss at that tier.
    `setting(family, tier)`, where given, is the setting the tier's cells train with: a run at another
    (one the transfer check superseded at that tier) is no candidate."""
    best: dict[tuple[str, float], tuple[float, str]] = {}
    for run in runs:
        budget, size = run.metrics.get("budget/flops"), size_of(run)
        # a run whose loss blew up after its best validation (null in its record) is no size to seed
        loss = None if run.failed or status_of(run.metrics) == "diverged" else selection_loss(run)
        if budget is None or size is None or loss is None or not math.isfinite(loss):
            continue
        if setting is not None and not ran_with(run, setting(run.family, float(budget))):
            continue
        key = (run.family, float(budget))
        if key not in best or loss < best[key][0]:
            best[key] = (loss, size)
    return {key: size for key, (_, size) in best.items()}


def ran_with(run, setting: dict | None) -> bool:
    """Whether a final run trained with `setting` (its recorded `tune/lr_scale` and `tune/tokens_per_step`);
    any run where there is no setting to match (a family without one)."""
    if setting is None:
        return True
    tokens = run.metrics.get("tune/tokens_per_step")
    used = {"lr_scale": run.metrics.get("tune/lr_scale"), "tokens_per_step": None if tokens is None else round(tokens)}
    return same_setting(used, setting)


def flops_text(budget: float) -> str:
    """1e12 -> `1e12`, 2.5e12 -> `2.5e12`: how the experiments write a tier on the command line."""
    return f"{budget:g}".replace("e+", "e")


def _value(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def per_family_override(settings: dict[str, dict]) -> str:
    """`tune.per_family={lstm:{lr_scale:2,tokens_per_step:512,size:l},...}` in Hydra's override grammar,
    families in table order."""
    def entry(values: dict) -> str:
        return "{" + ",".join(f"{k}:{_value(v)}" for k, v in values.items() if v is not None) + "}"

    entries = [f"{family}:{entry(settings[family])}" for family in order(settings)]
    return "tune.per_family={" + ",".join(entries) + "}"


class Experiment:
    """What the commands read from the tuning experiment's files: its presets, their sizes, its tiers."""
    def __init__(self, name: str, conf_dir: Path = CONF_DIR):
        path = conf_dir / "experiment" / f"{name}.yaml"
        if not path.is_file():
            raise SystemExit(f"no experiment {name} ({path})")
        register_resolvers()
        params = OmegaConf.load(path).hydra.sweeper.params
        self.name, self.conf_dir = name, conf_dir
        swept = str(OmegaConf.to_container(params, resolve=True)["preset"]).split(",")
        self.presets = {p.rsplit("/", 1)[-1]: p for p in swept}
        tables = [list(OmegaConf.load(conf_dir / "preset" / f"{p}.yaml").get("sizes") or {}) for p in swept]
        if not tables or any(t != tables[0] for t in tables) or not tables[0]:
            raise SystemExit(f"the presets of {name} do not share one `sizes` table: {tables}")
        self.sizes = tables[0]  # the ladder: every size the presets define, smallest first
        self.frontier = name.removeprefix("tune_")  # tune_frontier_ptb -> frontier_ptb: its tiers, the sweeps' names

    @property
    def grid(self) -> list[str]:
        """The sizes the size step runs at every tier: the frontier experiment's `size:` sweep (s, m, l), the
        rest of the ladder left to the profile step (`seqbench.protocol.profiles`), which runs a size below or
        above only where a profile needs it; without one, the whole ladder."""
        path = self.conf_dir / "experiment" / f"{self.frontier}.yaml"
        params = OmegaConf.select(OmegaConf.load(path), "hydra.sweeper.params") if path.is_file() else None
        grid = str(params["size"]).split(",") if params is not None and params.get("size") is not None else []
        unknown = [s for s in grid if s not in self.sizes]
        if unknown:
            raise SystemExit(f"{path}: size {', '.join(unknown)} is not in the presets' sizes ({', '.join(self.sizes)})")
        return grid or list(self.sizes)

    def tiers(self) -> list[float]:
        path = self.conf_dir / "experiment" / f"{self.frontier}.yaml"
        flops = OmegaConf.select(OmegaConf.load(path), "hydra.sweeper.params") if path.is_file() else None
        if not flops or flops.get("budget.flops") is None:
            raise SystemExit(f"no frontier experiment {path} with budget.flops tiers: give --budgets")
        return [float(b) for b in str(flops["budget.flops"]).split(",")]

    def preset_override(self, families) -> list[str]:
        """`preset=...` for these families where they are not all of the experiment's (a family without
        a setting would otherwise run at the sweep's size with the recipe's rate)."""
        if set(families) == set(self.presets):
            return []
        return ["preset=" + ",".join(self.presets[f] for f in order(families) if f in self.presets)]


def command(name: str, experiment: Experiment, budgets: list[float], seeds: str, settings: dict[str, dict],
            extra: tuple[str, ...] = ()) -> str:
    words = ["bash scripts/sweep_background.sh", name, f"experiment={experiment.name}", *FINAL, *extra,
             *experiment.preset_override(settings), f"budget.flops={','.join(map(flops_text, budgets))}",
             f"seed={seeds}", shlex.quote(per_family_override(settings))]
    return " ".join(words)


def final_commands(tuned: dict[str, dict], experiment: Experiment, size_runs=None, seeds: str = "2,3",
                   budgets: list[float] | None = None, name: str | None = None,
                   moved: dict[tuple[str, float], dict] | None = None) -> list[str]:
    """The lines to print: comments and commands. Without `size_runs`, the size-selection sweeps; with
    them, one seeds sweep per tier at each family's chosen size. `moved`: (family, tier) -> the setting
    the transfer check chose there where it is not the tuned one (`seqbench.protocol.transfer_check.per_tier`).

    Size selection: `<name>_sizes` holds the tiers where no family moved, every family at its tuned
    setting; a tier where one moved gets `<name>_sizes_<tier>`, every family at its setting there (the
    moved ones at theirs). A Hydra sweep is a cartesian product, so a single first sweep over every
    tier would also train the moved cells at the tuned setting, only for them to be passed over: on
    Tiny Shakespeare 24 runs, 15 of them at 1e13. The seeds then train at each cell's setting."""
    name = name or f"{experiment.frontier}_tuned"
    moved = moved or {}
    first_seed = OmegaConf.load(experiment.conf_dir / "train.yaml").seed
    if size_runs is None:
        tiers = budgets or experiment.tiers()
        sizes = (f"size={','.join(experiment.grid)}",)
        shifted = [b for b in tiers if any((f, float(b)) in moved for f in order(tuned))]
        kept = [b for b in tiers if b not in shifted]
        lines = []
        if kept:
            lines += [f"# size selection: each family's sizes once (seed {first_seed}) with its tuned setting, at "
                      f"{', '.join(map(flops_text, kept))} FLOPs (no transfer check moved a family there)",
                      command(f"{name}_sizes", experiment, kept, str(first_seed), tuned, sizes)]
        for budget in shifted:
            here = {f: setting_at(tuned, moved, f, budget) for f in order(tuned)}
            own = [f for f in order(tuned) if (f, float(budget)) in moved]
            # the families that did not move may have run at this tier in the first sweep already (an older
            # layout, or a check that moved a family after it): their archived runs are restored, not rerun
            lines += [f"# {flops_text(budget)} FLOPs: the transfer check moved {', '.join(own)}: every family's sizes "
                      f"at its setting there",
                      command(f"{name}_sizes_{flops_text(budget)}", experiment, [budget], str(first_seed), here,
                              (*sizes, f"hydra.launcher.archive_from=[{name}_sizes]"))]
        return lines + [f"# then: python -m seqbench.protocol.final_cells <search dirs> --sizes outputs/sweeps/{name}_sizes* "
                        f"--corpus-experiment {experiment.name}"]
    chosen = chosen_sizes(size_runs, lambda family, tier: setting_at(tuned, moved, family, tier) if family in tuned else None)
    tiers = budgets or sorted({budget for _, budget in chosen})
    lines = []
    for budget in tiers:
        settings = {f: {**setting_at(tuned, moved, f, budget), "size": chosen[(f, budget)]}
                    for f in order(tuned) if (f, budget) in chosen}
        missing = [f for f in order(tuned) if (f, budget) not in chosen]
        said = [f"the size with the lowest selection loss (seed {first_seed}): "
                + ", ".join(f"{f} {s['size']}" for f, s in settings.items())] if settings else []
        said += [f"no completed size run, left out: {', '.join(missing)}"] if missing else []
        lines.append(f"# {flops_text(budget)} FLOPs: " + "; ".join(said))
        if settings:
            lines.append(command(f"{name}_seeds_{flops_text(budget)}", experiment, [budget], seeds, settings))
    return lines


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(prog="python -m seqbench.protocol.final_cells", description="The final cells' sweeps: "
                                     "sizes by one seed, then seeds for the size chosen at each tier.")
    parser.add_argument("dirs", nargs="+", type=Path, help="the search's sweep directories (the tuned settings)")
    parser.add_argument("--sizes", nargs="+", type=Path, help="the size-selection sweep's directories")
    parser.add_argument("--corpus-experiment", default="tune_frontier", help="tune_frontier or tune_frontier_ptb")
    parser.add_argument("--seeds", default="2,3", help="the chosen cells' further seeds")
    parser.add_argument("--budgets", help="tiers, e.g. 1e11,1e12 (default: the size runs', else the frontier's)")
    parser.add_argument("--name", help="sweep name prefix (default: <frontier experiment>_tuned)")
    args = parser.parse_args(argv)
    rows = summary(read_runs(args.dirs))
    tuned = per_family(rows)
    if not tuned:
        raise SystemExit(f"no completed search trial under {', '.join(map(str, args.dirs))}")
    # a search still running gives its best so far: the trials say how far each family got
    lines = ["# the search's best setting per family, from (trials, failed): "
             + ", ".join(f"{r['family']} ({r['trials']}, {r['failed']})" for r in rows)]
    budgets = [float(b) for b in args.budgets.split(",")] if args.budgets else None
    size_runs = read_runs(args.sizes) if args.sizes else None
    lines += final_commands(tuned, Experiment(args.corpus_experiment), size_runs, args.seeds, budgets, args.name)
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(sys.argv[1:])
