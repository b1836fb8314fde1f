"""The tuning search's trials, read from its sweep directories as they stand, finished or not.

`seqbench.training.record.read_runs` reads only the jobs that wrote a record, which a run does when it
ends; a search that is still running (or was stopped) also has jobs that started and have not ended,
and jobs not started yet. Its record must say how far it got, so each job becomes a `Trial` with
a status:

- `completed`: finished, every recorded loss finite;
- `diverged`: finished, but its best validation loss, its last validation loss or its last training
  loss is not finite (a rate that blows up before the budget's end is not a setting to transfer;
  `seqbench.training.run` writes such a number as null);
- `failed`: its record says so, or the launcher's `jobs.jsonl` does and the job never wrote one
  (a crash before training); the resumable launcher runs such a job again on its next launch;
- `running`: the job's directory exists and holds no record: running now, or killed before it
  could write one (the launcher resumes it); not finished, either way.

A trial's grid point is what the job asked for (`tune.lr_scale`, `tune.tokens_per_step` of its saved
config, through `seqbench.training.tune.settings`), so a running trial has one too; the tokens a step
actually held (`tune/tokens_per_step`, rounded to whole streams or windows; for an untuned run,
the tokens it trained on per step) are recorded beside it.
The family comes from the model the job composed (`seqbench.families.family_of`), the corpus from
the preset's folder (`frontier/ptb/lstm` -> `ptb`).

The planned grid (`planned`) is read from the sweep's `multirun.yaml` with Hydra's own override
parser, so a partial search knows its grid's edges and how many trials have not started.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from seqbench.entry import register_resolvers
from seqbench.families import FAMILIES, family_of
from seqbench.identity import preset_of
from seqbench.training.clocks import run_seconds
from seqbench.training.hydra_callbacks import last_outcomes
from seqbench.training.record import CONFIG, HYDRA, read_metrics
from seqbench.training.saved_yaml import load, load_dict
from seqbench.training.tune import settings

FINISHED = ("completed", "diverged", "failed")
LEARNED = 0.05  # a probe's trial learned: its loss at least 5 % below the loss of learning nothing
SELECTION_HALF = "selection half of validation"  # Tiny Shakespeare with data.heldout_score: its first half
VALIDATION = "validation"


@dataclass(frozen=True)
class Trial:
    job: str                       # <sweep dir name>/<job number>
    family: str
    corpus: str
    status: str                    # completed | diverged | failed | running
    size: str | None = None
    params: int | None = None      # non-embedding parameters
    budget: float | None = None    # training FLOPs
    lr_scale: float | None = None  # the grid's rate factor (x the recipe's lr)
    tokens_grid: int | None = None  # the grid's tokens per step (what the job asked for)
    tokens_per_step: int | None = None  # the tokens a step held (whole streams or windows)
    gap: int | None = None         # a probe's `data.T`: a search over several gaps picks one rate for all
    recipe_lr: float | None = None
    lr: float | None = None
    steps: int | None = None
    loss: float | None = None      # the best validation loss (val/loss_best), on `selected_on`
    baseline: float | None = None  # a probe's loss of a model that learned nothing (val/baseline_loss)
    selected_on: str = VALIDATION
    wall_time_s: float | None = None
    cost_s: float | None = None    # seconds of one core (seqbench.training.clocks.run_seconds: CPU seconds on one CPU thread)
    schedule: str | None = None    # the one schedule that replaced the recipe's (tune/schedule), if any
    hardware: str | None = None    # the machine and the code the trial ran on (its record)
    device: str | None = None      # what trained (its record's `device`): which clock cost_s read
    git_commit: str | None = None

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def untuned(self) -> bool:
        """The recipe as it is: lr x 1 (or unset), its own tokens per step and schedule."""
        return self.lr_scale in (None, 1.0) and self.tokens_grid is None and self.schedule is None

    @property
    def learned(self) -> bool:
        """A probe's trial learned where its selection loss is at least `LEARNED` below the baseline's
        (a relative margin: a loss a hair under chance is a finite sample's, not a memory); a trial with
        no baseline (a language model) counts as learning."""
        return self.baseline is None or (self.loss is not None and self.loss < (1 - LEARNED) * self.baseline)

    @property
    def candidate(self) -> bool:
        """A trial the search may pick: completed with a finite selection loss."""
        return self.status == "completed" and self.loss is not None


def _finite(value) -> bool:
    return value is None or math.isfinite(float(value))


def status_of(metrics: dict | None) -> str:
    if metrics is None or metrics.get("status") not in ("completed", "failed"):
        return "running"
    if metrics["status"] == "failed":
        return "failed"
    # seqbench.training.run writes a NaN or infinite number as null (JSON has none): a loss key present and null
    # is a loss that blew up, not one that was never measured
    keys = [k for k in ("val/loss_best", "val/loss", "train/loss") if k in metrics]
    if not all(metrics[k] is not None and _finite(metrics[k]) for k in keys):
        return "diverged"
    return "completed" if metrics.get("val/loss_best") is not None else "failed"  # no validation: no trial


def _float(value) -> float | None:
    return None if value is None else float(value)


def _int(value) -> int | None:
    return None if value is None else int(round(float(value)))


def _tokens_used(m: dict) -> int | None:
    """`tune/tokens_per_step` where the search set it; else the tokens trained on per step (an untuned
    recipe's own batch: `curve/tokens` over `budget/max_steps`)."""
    if m.get("tune/tokens_per_step") is not None:
        return _int(m["tune/tokens_per_step"])
    if m.get("curve/tokens") and m.get("budget/max_steps"):
        return _int(m["curve/tokens"] / m["budget/max_steps"])
    return None


def _choices(job: Path) -> dict:
    path = job / ".hydra" / "hydra.yaml"
    if not path.is_file():
        return {}
    return dict(((load_dict(path).get("hydra") or {}).get("runtime") or {}).get("choices") or {})


def _corpus(choices: dict) -> str:
    """`frontier/ptb/lstm` -> `ptb`; without a foldered preset, the data config's name."""
    preset = str(preset_of(choices) or "")
    return preset.split("/")[-2] if preset.count("/") >= 1 else str(choices.get("data") or "?")


def from_metrics(job: str, family: str, corpus: str, metrics: dict | None, **from_config) -> Trial:
    """A trial as its record tells it (None: not written yet); `from_config`: fields its saved
    config tells, which win. Told by its record alone, the grid point is what the run recorded of
    it: `tune/lr_scale`, and for tokens per step `tune/tokens_per_step`, the tokens the asked number
    rounded to (whole streams or windows), which asks for the same streams or windows again."""
    m = metrics or {}
    loss = m.get("val/loss_best")
    return Trial(**{
        "job": job, "family": family, "corpus": corpus, "status": status_of(metrics),
        "size": str(m.get("tune/size") or "") or None, "params": _int(m.get("params_non_embedding")),
        "budget": _float(m.get("budget/flops")), "lr_scale": _float(m.get("tune/lr_scale")),
        "tokens_grid": _int(m.get("tune/tokens_per_step")), "tokens_per_step": _tokens_used(m),
        "recipe_lr": _float(m.get("tune/recipe_lr")), "lr": _float(m.get("tune/lr")),
        "steps": _int(m.get("budget/max_steps")),
        "loss": _float(loss) if loss is not None and math.isfinite(float(loss)) else None,
        "baseline": _float(m.get("val/baseline_loss")),
        "wall_time_s": _float(m.get("wall_time_s")), "cost_s": run_seconds(m), "schedule": m.get("tune/schedule"),
        "hardware": m.get("hardware"), "device": m.get("device"), "git_commit": m.get("git_commit"), **from_config})


def from_run(run) -> Trial:
    """A finished run (`seqbench.training.record.Run`, what `read_runs` gives) as a trial: read from its job
    directory where it has one with a saved config (the config knows the size and corpus that an
    older records did not keep), else from its record alone (no corpus known)."""
    if run.path is not None and (run.path / ".hydra" / "config.yaml").is_file():
        return read_job(run.path, run.path.parent)
    return from_metrics(run.name, run.family, "?", run.metrics)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    if not path.is_file():
        return None
    st = path.stat()
    return st.st_mtime_ns, st.st_size, st.st_ino  # the inode: a file replaced by another (os.replace)


def _registry() -> tuple:
    """What `family_of` reads of the registry: each family's name, module and selector."""
    return tuple((f.name, f.module, tuple(sorted(f.selector.items()))) for f in FAMILIES.values())


@functools.lru_cache(maxsize=8192)
def _asked(job: Path, config_stamp: tuple, hydra_stamp: tuple | None, registry: tuple) -> dict:
    """What a job's saved config asked for, read once while its files and the family registry are
    unchanged (the key; `families.registered` may add a family for a while): the campaign's dry run
    reads each job's config about ten times over."""
    cfg: DictConfig = load(job / ".hydra" / "config.yaml")
    grid = settings(cfg)
    data = cfg.get("data") or {}
    return {"family": family_of(cfg.model), "corpus": _corpus(_choices(job)), "size": cfg.get("size"),
            "budget": OmegaConf.select(cfg, "budget.flops", default=None),
            "lr_scale": _float(grid.get("lr_scale")), "tokens_grid": _int(grid.get("tokens_per_step")),
            "gap": _int(data.get("T")) if "T" in data else None,
            "selected_on": SELECTION_HALF if data.get("heldout_score") else VALIDATION}


def read_job(job: Path, sweep: Path) -> Trial:
    """One job directory (it holds `.hydra/`, and its record once it has started): its grid point is
    what its config asked for, so a running job has one too."""
    asked = dict(_asked(job, _stamp(job / CONFIG), _stamp(job / HYDRA), _registry()))
    metrics = read_metrics(job)
    m = metrics or {}
    family, corpus = asked.pop("family"), asked.pop("corpus")
    return from_metrics(
        f"{sweep.name}/{job.name}", family, corpus, metrics, **{
            **asked, "size": str(m.get("tune/size") or asked["size"] or "") or None,
            "budget": _float(m.get("budget/flops", asked["budget"]))})


def _crashed(sweep: Path) -> set[str]:
    """The directory names of the jobs whose last outcome in the launcher's `jobs.jsonl` is a failure."""
    return {Path(record.get("dir") or str(job)).name for job, record in last_outcomes(sweep).items()
            if record.get("status") == "failed"}


def read_trials(sweeps: list[Path]) -> list[Trial]:
    """Every job of the given sweep directories, in their order (base search, then its extensions)."""
    trials = []
    for sweep in map(Path, sweeps):
        if not sweep.is_dir():
            raise SystemExit(f"{sweep} is not a directory; give the search's sweep directories (outputs/sweeps/<name>)")
        crashed = _crashed(sweep)
        jobs = sorted((p.parent.parent for p in sweep.glob("*/.hydra/config.yaml")),
                      key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name))
        for job in jobs:
            trial = read_job(job, sweep)
            if trial.status == "running" and job.name in crashed:
                trial = Trial(**{**trial.__dict__, "status": "failed"})
            trials.append(trial)
    return trials


Point = tuple[float | None, float | None, int | None, int | None]  # (budget, lr_scale, tokens_per_step, gap)


def point(trial: Trial) -> Point:
    return trial.budget, trial.lr_scale, trial.tokens_grid, trial.gap


def sweep_axes(lines: list[str]) -> dict[str, list[str]]:
    """Each key's values in override lines (`k=v`, `k=a,b`), parsed by Hydra's own override parser; a
    later line of the same key wins, as the command line wins over the experiment's `hydra.sweeper.params`
    in Hydra's basic sweeper, which runs the cartesian product of these axes."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    axes: dict[str, list[str]] = {}
    for override in OverridesParser.create().parse_overrides(lines):
        axes[override.key_or_group] = (list(override.sweep_string_iterator()) if override.is_sweep_override()
                                       else [override.get_value_element_as_str()])
    return axes


def planned(sweep: Path) -> dict[tuple[str, str], set[Point]] | None:
    """(corpus, family) -> the grid points the sweep will run, from its `multirun.yaml` (the
    experiment's sweep axes, then the command line's, combined as Hydra's basic sweeper does); None
    where the sweep has no such file or sweeps no preset."""
    path = Path(sweep) / "multirun.yaml"
    if not path.is_file():
        return None
    register_resolvers()
    doc = load(path)
    params = OmegaConf.to_container(OmegaConf.select(doc, "hydra.sweeper.params") or OmegaConf.create({}), resolve=True)
    axes = sweep_axes([f"{k}={v}" for k, v in params.items()] + list(OmegaConf.select(doc, "hydra.overrides.task") or []))
    if not axes.get("preset"):
        return None
    budgets = [_float(v) for v in axes.get("budget.flops", [None])]
    lrs = [float(v) for v in axes.get("tune.lr_scale", ["1"])]
    tokens = [None if v == "null" else _int(v) for v in axes.get("tune.tokens_per_step", ["null"])]
    gaps = [_int(v) for v in axes["data.T"]] if "data.T" in axes else [None]  # a probe's gaps (long_range_lr)
    own = _per_family(axes.get("tune.per_family", ["null"])[0])
    plans = {}
    for preset in axes["preset"]:
        family = preset.rsplit("/", 1)[-1]
        mine = own.get(family) or {}  # tune.per_family fixes a family's point (seqbench.training.tune.settings)
        rates = [float(mine["lr_scale"])] if mine.get("lr_scale") is not None else lrs
        sizes = [_int(mine["tokens_per_step"])] if mine.get("tokens_per_step") is not None else tokens
        plans[(_corpus({"preset": preset}), family)] = set(itertools.product(budgets, rates, sizes, gaps))
    return plans


def _per_family(value: str) -> dict:
    """`tune.per_family`'s value as the command line wrote it (`{gpt:{lr_scale:2},...}`), as a dict."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_override(f"tune.per_family={value}").value()
    return parsed if isinstance(parsed, dict) else {}
