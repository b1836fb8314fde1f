"""The tuning protocol's steps as sweeps, each computed from the sweeps already run under a root (`Chain`);
`python -m seqbench.protocol.campaign` runs them in order, and its docstring tells the chain and its sweeps' names.
The steps are read, not remembered: a chain stopped anywhere computes the same remaining sweeps again."""

from __future__ import annotations

import math
import shlex
from collections import Counter
from itertools import product
from pathlib import Path

from omegaconf import OmegaConf

from seqbench.compose import CONF_DIR
from seqbench.entry import register_resolvers
from seqbench.identity import preset_name
from seqbench.protocol.final_cells import (
    TOP_SEEDS,
    Experiment,
    chosen_sizes,
    command,
    final_commands,
    flops_text,
    ran_with,
)
from seqbench.protocol.profiles import plan, points_of, train_tokens
from seqbench.protocol.scaling_laws import profiles
from seqbench.protocol.sweep_reads import SweepReads
from seqbench.protocol.transfer_check import checks, per_tier, rate_extensions, setting_at, token_extensions
from seqbench.protocol.tuning import per_family, rows, searched
from seqbench.protocol.tuning_extension import commands
from seqbench.protocol.tuning_search import searches, token_neighbours
from seqbench.protocol.tuning_trials import planned, read_trials, sweep_axes

Job = tuple[str, float]  # (family, FLOPs budget): what a run's cost is estimated from

DONE = "campaign.done"
Sweep = tuple[str, list[str]]  # (sweep name, overrides)


def parse_commands(lines: list[str]) -> list[Sweep]:
    """The `bash scripts/sweep_background.sh <name> <overrides...>` lines the tuning tools print, as sweeps
    (comment lines are skipped)."""
    out = []
    for line in lines:
        if line.startswith("bash scripts/sweep_background.sh "):  # comments are prose: not split as words
            words = shlex.split(line)
            out.append((words[2], words[3:]))
    return out


class Chain:
    """The protocol's steps for one tuning experiment, each computed from the sweeps already run."""

    def __init__(self, experiment: str, root: Path):
        self.experiment, self.root = experiment, Path(root)
        self._read = SweepReads()  # read once per finished job (`seqbench.protocol.sweep_reads`)

    def search_dirs(self) -> list[Path]:
        names = [self.experiment, f"{self.experiment}_edge_tokens", f"{self.experiment}_edge_lr"]
        return [self.root / n for n in names if (self.root / n).is_dir()]

    def search(self) -> list[Sweep]:
        return [(self.experiment, [f"experiment={self.experiment}"])]

    def untuned(self) -> list[Sweep]:
        return [(f"{self.experiment}_untuned", [f"experiment={self.experiment}", "tune.schedule=null",
                                                "tune.lr_scale=1", "tune.tokens_per_step=null"])]

    def edges(self) -> list[Sweep]:
        base = self.root / self.experiment
        found = searches(read_trials([base]), planned(base) or {})
        return parse_commands(commands(found, [base]))

    def sizes(self) -> list[Sweep]:
        return self._final(None)

    def profiles(self) -> list[Sweep]:
        """The IsoFLOP profiles grown past the size grid (issue 64, item 1): for each (family, tier) whose
        runs so far at its tier's setting need another size of the presets' ladder (`seqbench.protocol.profiles.plan`:
        past an edge the valley runs off, then on to five sizes spanning 8x, never a size that would repeat
        its text more than 4 times), one sweep of that size, one seed, as the size step runs its sizes:
        `<frontier>_tuned_sizes_profile_<tier>_<family>_<size>`. A job the size step's archive holds (a size
        run before the grid was cut to the frontier's) is restored, not trained. The step grows from its own
        results: the campaign computes it again after each round, until no profile asks for more."""

        experiment = Experiment(self.experiment)
        tuned, moved = self.settings()
        if not tuned:
            return []
        first_seed = OmegaConf.load(experiment.conf_dir / "train.yaml").seed
        runs = [r for r in self._read(self.size_dirs()) if not r.failed and r.family in tuned
                and r.metrics.get("budget/flops") is not None
                and ran_with(r, setting_at(tuned, moved, r.family, float(r.metrics["budget/flops"])))]
        points = points_of(runs, experiment.tiers())
        by_family: dict[str, list] = {}
        for p in points:
            by_family.setdefault(p.family, []).append(p)
        tokens = {r.family: train_tokens(r) for r in runs}
        out = []
        for (family, tier), group in sorted(profiles(points).items()):
            step = plan(group, by_family[family], experiment.sizes, tokens[family])
            if step.size is None:
                continue
            name = f"{experiment.frontier}_tuned_sizes_profile_{flops_text(tier)}_{family}_{step.size}"
            setting = {family: {**setting_at(tuned, moved, family, tier), "size": step.size}}
            out += parse_commands([command(name, experiment, [tier], str(first_seed), setting,
                                           (f"hydra.launcher.archive_from=[{experiment.frontier}_tuned_sizes]",))])
        return out

    def seeds(self) -> list[Sweep]:
        return self._final(self.size_dirs())

    def size_dirs(self) -> list[Path]:
        """The size-selection sweeps: `<frontier>_tuned_sizes` and one `<frontier>_tuned_sizes_<tier>` per
        tier where the transfer check moved a family's setting."""

        name = f"{Experiment(self.experiment).frontier}_tuned_sizes"
        found = sorted(self.root.glob(f"{name}_*")) if self.root.is_dir() else []
        return [d for d in [self.root / name, *found] if d.is_dir()]

    def transfer_dirs(self) -> list[Path]:
        return sorted(self.root.glob(f"{self.experiment}_transfer_*")) if self.root.is_dir() else []

    def _final(self, sizes: list[Path] | None) -> list[Sweep]:
        size_runs = self._read(sizes) if sizes else None
        tuned, moved = self.settings()
        return parse_commands(final_commands(tuned, Experiment(self.experiment), size_runs, moved=moved))

    def checks(self) -> tuple[dict[str, dict], dict]:
        """Each family's tuned setting, and the transfer check of each (family, tier) it has reached
        (`seqbench.protocol.transfer_check.checks`)."""
        found, dirs = self._searches(), self.transfer_dirs()
        tuned = self._tuned(found)
        planned = Counter(job for _, overrides in self._transfer(found) for job in sweep_jobs(overrides))
        return tuned, checks(self._read(dirs), tuned, planned) if dirs else {}

    def settings(self) -> tuple[dict[str, dict], dict[tuple[str, float], dict]]:
        """Each family's tuned setting, and where the transfer check moved it at a tier, the one it chose there."""

        tuned, found = self.checks()
        return tuned, per_tier(tuned, found)

    def transfer(self) -> list[Sweep]:
        """The transfer check, at every tier of the frontier the search did not run at, the highest first
        (where the inherited setting has the most steps it was not tuned for): each family at the searched
        size, one seed: its tuned setting and its two rate neighbours (lr x/÷ 2), one sweep; then its
        neighbours one grid step away on the tokens-per-step axis at its tuned rate, a second sweep
        (`_transfer_tokens_`): the tokens a step should hold grow with the budget (McCandlish et al.
        2018), and a search at a small budget favours the fewest. Where the best of the rates tried lies
        on the lowest or the highest of them, one sweep more, a rate one step further that way
        (`seqbench.protocol.transfer_check.rate_extensions`), and where the best of the tokens tried at the tuned rate is
        the most of them, one sweep of twice that (`token_extensions`): this step grows from its own
        results, and `main` computes it again after running it. The best checked trial is the family's setting at that tier
        (`seqbench.protocol.transfer`)."""
        return self._transfer(self._searches())

    def _transfer(self, found: list) -> list[Sweep]:
        experiment = Experiment(self.experiment)
        searched_tier, size = searched_at(self.experiment)
        grids, tuned = token_neighbours(found), self._tuned(found)
        dirs = self.transfer_dirs()
        checked = {(s.family, float(s.budget)): s for s in searched(self._read(dirs)) if s.budget} if dirs else {}
        out = []
        for tier in sorted((t for t in experiment.tiers() if t != searched_tier), reverse=True):
            for family, setting in tuned.items():
                lr = float(setting["lr_scale"])
                common = [f"experiment={self.experiment}", f"preset={experiment.presets[family]}", f"size={size}",
                          f"budget.flops={flops_text(tier)}"]
                out.append((f"{self.experiment}_transfer_{flops_text(tier)}_{family}",
                            [*common, f"tune.lr_scale={lr / 2:g},{lr:g},{lr * 2:g}",
                             f"tune.tokens_per_step={setting['tokens_per_step']}"]))
                if grids.get(family):
                    out.append((f"{self.experiment}_transfer_tokens_{flops_text(tier)}_{family}",
                                [*common, f"tune.lr_scale={lr:g}",
                                 "tune.tokens_per_step=" + ",".join(map(str, grids[family]))]))
                for rate in rate_extensions(checked.get((family, float(tier))), setting):
                    out.append((f"{self.experiment}_transfer_lr_{flops_text(tier)}_{family}_{rate:g}",
                                [*common, f"tune.lr_scale={rate:g}", f"tune.tokens_per_step={setting['tokens_per_step']}"]))
                for tokens in token_extensions(checked.get((family, float(tier))), setting, grids.get(family)):
                    out.append((f"{self.experiment}_transfer_tokens_{flops_text(tier)}_{family}_{tokens}",
                                [*common, f"tune.lr_scale={lr:g}", f"tune.tokens_per_step={tokens}"]))
        return out

    def top(self) -> list[Sweep]:
        """One tier beyond the frontier's highest: each family (of `self.top_families`, all by default) at
        the size chosen at the highest tier, with its setting there (the transfer check's, where it moved
        the tuned one: the nearest tier checked), `final_cells.TOP_SEEDS` seeds, one sweep per seed. A
        multirun varies its last key fastest (the seed), so one sweep of every seed would run all seeds
        of one family before the next family: the tier's runs take several sessions, and a chain stopped
        half-way would leave some families with every seed and others with none. Seed by seed, every
        family has its first number before any has its second."""

        experiment = Experiment(self.experiment)
        highest = max(experiment.tiers())
        tuned, moved = self.settings()
        chosen = chosen_sizes(self._read(self.size_dirs()), lambda f, t: setting_at(tuned, moved, f, t) if f in tuned else None)
        settings = {f: {**setting_at(tuned, moved, f, highest), "size": chosen[(f, highest)]} for f in tuned
                    if (f, highest) in chosen and (not self.top_families or f in self.top_families)}
        if not settings:
            return []
        first_seed = OmegaConf.load(experiment.conf_dir / "train.yaml").seed
        tier = flops_text(highest * 10)
        return parse_commands([command(f"{experiment.frontier}_tuned_top_{tier}_seed{seed}", experiment,
                                       [highest * 10], str(seed), settings) for seed in (first_seed, *range(2, TOP_SEEDS + 1))])

    def _searches(self) -> list:
        """The search's runs (its grid and the grid's extension) as `Search`es: read once for a step,
        which takes both the tuned settings and the grid around them from them."""

        return searched(self._read(self.search_dirs()))

    @staticmethod
    def _tuned(searches: list) -> dict[str, dict]:
        return per_family(rows(searches))

    def ready(self, step: str) -> bool:
        """Whether a step's sweeps can be computed yet (for the dry run; the chain itself runs the steps in
        order): the untuned recipes and the grid's extension read the search; the transfer check and the
        sizes read the extension as well (before it, they would come from the base grid alone; the sizes'
        sweeps of the tiers the transfer check moved come from the check so far); the profiles read the size
        sweeps; the seeds and the top tier read every size and profile sweep's runs."""

        def done(name: str) -> bool:
            return (self.root / name / DONE).is_file()

        if step == "search":
            return True
        if step in ("untuned", "edges"):
            return done(self.experiment)
        extended = done(self.experiment) and all(done(name) for name, _ in self.edges())
        if not extended or step in ("transfer", "sizes"):
            return extended
        sized = all(done(name) for name, _ in self.sizes())
        if not sized or step == "profiles":
            return sized
        return all(done(name) for name, _ in self.profiles())

    STEPS = ("search", "untuned", "edges", "transfer", "sizes", "profiles", "seeds", "top")
    top_families: tuple[str, ...] = ()


def sweep_jobs(overrides: list[str], conf_dir: Path | None = None) -> list[Job]:
    """The jobs of one sweep: `experiment=<name>`'s `hydra.sweeper.params`, then the sweep's overrides."""
    register_resolvers()
    experiment = next(o.split("=", 1)[1] for o in overrides if o.startswith("experiment="))
    params = OmegaConf.load(Path(conf_dir or CONF_DIR) / "experiment" / f"{experiment}.yaml").hydra.sweeper.params
    axes = sweep_axes([f"{k}={v}" for k, v in OmegaConf.to_container(params, resolve=True).items()] + overrides)
    others = math.prod(len(v) for k, v in axes.items() if k not in ("preset", "budget.flops"))
    return [(preset_name(p), float(b)) for p, b in product(axes["preset"], axes["budget.flops"])] * others


def searched_at(experiment: str) -> tuple[float, str]:
    """The tier and size the tuning experiment searches (its `budget.flops` axis and `size`)."""
    conf = OmegaConf.load(CONF_DIR / "experiment" / f"{experiment}.yaml")
    return float(str(conf.hydra.sweeper.params["budget.flops"])), str(conf.size)
