"""A run's record: what a job leaves in its directory, written here and read back only through here.

    <job>/metrics.json          final metrics and provenance (`write_metrics`): status, params, tokens/s,
                                the clocks, device, hardware, commit, overrides, the tuning setting (tune/...)
    <job>/csv/metrics.csv       the history, one row per validation (`read_curve`: val/ppl with the tokens
                                and the training clocks at it, from seqbench.callbacks.LearningCurve)
    <job>/.hydra/config.yaml    the resolved config the run used (seqbench.compose.save_config)
    <job>/.hydra/hydra.yaml     Hydra's own node: the group choices (`choices`), the preset among them
    <sweep>/jobs.jsonl          how each job of a multirun ended (seqbench.training.hydra_callbacks)

Before this module, a run's record was read by hand in a dozen places, each with its idea of the
file's name, of a run's family and of its cost over a resumed run's segments; a reader that disagreed
with another gave two pages two numbers for one run. Now every report, protocol step and instrument
reads a run as a `Run` (`read_runs` for sweeps, `Run.at` for one directory): its metrics, its saved
config, its preset and family, its seed, its tuning setting, its curve, and its wall and CPU time over
every segment (`seqbench.training.clocks`).

The names a report groups by: `Run.family` is the preset's name (`preset=ptb/lstm_fb1` -> `lstm_fb1`,
a variant keeps its own row) or else the `model=` choice; the registry's family of any of them is
`seqbench.families.family_of(run)`.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from seqbench.identity import preset_name, preset_of
from seqbench.training.clocks import WALL_CLOCK, run_seconds, wall_seconds
from seqbench.training.hydra_callbacks import last_outcomes
from seqbench.training.saved_yaml import load, load_dict

METRICS = "metrics.json"              # a training run's record
EVAL_METRICS = "eval_metrics.json"    # an evaluation's (src/eval.py)
CURVE = Path("csv") / "metrics.csv"   # the history Lightning's CSV logger writes (seqbench.training.csv_logger)
CONFIG = Path(".hydra") / "config.yaml"
HYDRA = Path(".hydra") / "hydra.yaml"
CURVE_KEYS = ("val/ppl", "val/loss", "curve/tokens", "curve/train_time_s", "curve/train_cpu_s", "curve/wall_time_s",
              "train/flops")


# Modules a run's saved config names by import path that issue 68 moved into the run room: a config saved
# before reads at the new path (the class is the same), so an old run directory still evaluates with its
# W&B logger (`seqbench.training.evaluate`).
MOVED_TARGETS = {"seqbench.csv_logger.": "seqbench.training.csv_logger.", "seqbench.loggers.": "seqbench.training.loggers.",
                 "seqbench.hydra_callbacks.": "seqbench.training.hydra_callbacks.", "seqbench.run.": "seqbench.training.run."}


def moved_target(target: str) -> str:
    """`target` at its module's current path (itself where its module did not move)."""
    for old, new in MOVED_TARGETS.items():
        if isinstance(target, str) and target.startswith(old):
            return new + target[len(old):]
    return target


def with_moved_targets(cfg: DictConfig) -> DictConfig:
    """`cfg` (a saved config) with every `_target_` at its module's current path, in place."""
    for key in list(cfg.keys()) if isinstance(cfg, DictConfig) else []:
        node = cfg._get_node(key)
        if key == "_target_" and not node._is_interpolation():
            cfg[key] = moved_target(cfg[key])
        elif isinstance(node, DictConfig):
            with_moved_targets(node)
    return cfg


# -- writing --------------------------------------------------------------------------------------
def _scalar(value: Any) -> Any:
    if hasattr(value, "item") and not isinstance(value, (bool, int, float, str)):  # a tensor (or numpy) scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; a missing number reads as null
    return value


def write_metrics(path: Path, metrics: dict[str, Any]) -> None:
    """The record as one JSON file, replaced whole (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({k: _scalar(v) for k, v in metrics.items()}, indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


# -- reading one directory ------------------------------------------------------------------------
def read_metrics(job_dir: Path, name: str = METRICS) -> dict | None:
    """The job's record (None: not written, or not whole)."""
    try:
        return json.loads((Path(job_dir) / name).read_text())
    except (OSError, ValueError):
        return None


def has_record(job_dir: Path) -> bool:
    return (Path(job_dir) / METRICS).is_file()


def completed(job_dir: Path) -> bool:
    """The job finished: its record says so (a killed or failed run's does not)."""
    return (read_metrics(job_dir) or {}).get("status") == "completed"


def job_dirs(root: Path, pattern: str = "**") -> list[Path]:
    """The directories under `root` that hold a record (`pattern`: `*` for a sweep's own jobs only)."""
    return sorted({p.parent for p in Path(root).glob(f"{pattern}/{METRICS}")})


def written(root: Path, pattern: str = "*") -> tuple[int, int]:
    """(records, the latest write in ns) of the jobs under `root`: what changes when a job starts (a run
    writes its record as it starts, `status: running`) or ends."""
    times = [(d / METRICS).stat().st_mtime_ns for d in job_dirs(root, pattern)]
    return len(times), max(times, default=0)


def configured_dirs(root: Path, pattern: str = "**") -> list[Path]:
    """The directories under `root` that hold a saved config: every job that started, ended or not."""
    return sorted({p.parent.parent for p in Path(root).glob(f"{pattern}/{CONFIG.as_posix()}")})


def has_config(job_dir: Path) -> bool:
    return (Path(job_dir) / CONFIG).is_file()


def saved_config(job_dir: Path) -> DictConfig:
    """The resolved config the run used, as OmegaConf reads it (`seqbench.training.saved_yaml`)."""
    return load(Path(job_dir) / CONFIG)


def saved_dict(job_dir: Path) -> dict:
    """The saved config as plain containers ({} where there is none)."""
    path = Path(job_dir) / CONFIG
    return load_dict(path) if path.is_file() else {}


def choices(job_dir: Path) -> dict:
    """Hydra's group choices of the run ({} where its hydra.yaml is gone)."""
    path = Path(job_dir) / HYDRA
    if not path.is_file():
        return {}
    return dict(((load_dict(path).get("hydra") or {}).get("runtime") or {}).get("choices") or {})


def label_of(job_dir: Path) -> str:
    """The name a report groups the run by: its preset's name (`preset=ptb/lstm`, `+family=ptb/lstm`
    before issue 34 -> lstm), or else the model config it composed, or else its directory's name."""
    chosen = choices(job_dir)
    if preset_of(chosen):
        return preset_name(preset_of(chosen))
    if chosen.get("model"):
        return str(chosen["model"])
    return Path(job_dir).name


def seed_of(overrides: str) -> int | None:
    """The seed a run's overrides set (`seed=2`, `+seed=2`, `++seed=2`; not `data.seed=4`): None where they
    do not (the config's default)."""
    found = re.findall(r"(?:^|\s)\+*seed=(\d+)", overrides)
    return int(found[-1]) if found else None  # the last: a later override wins


def run_setting(metrics: dict) -> tuple[float | None, int | None]:
    """The tuned point a run trained at (`tune/lr_scale`, `tune/tokens_per_step`), as a key: runs at two
    settings are two configurations, never seeds of one (the transfer check leaves a tier's final runs
    at the tuned setting beside those at the setting it chose); (None, None) for an untuned run."""
    lr, tokens = metrics.get("tune/lr_scale"), metrics.get("tune/tokens_per_step")
    return (None if lr is None else round(float(lr), 6), None if tokens is None else round(tokens))


def run_setting_text(key: tuple[float | None, int | None]) -> str:
    lr, tokens = key
    return ", ".join(([f"lr x {lr:g}"] if lr is not None else []) + ([f"{tokens} tok"] if tokens is not None else []))


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def read_curve(path: Path) -> list[dict]:
    """Rows of a CSVLogger history (a job directory: its own) that hold a validation perplexity, in step
    order, one per step: a resumed run keeps its history up to its checkpoint's step
    (`seqbench.training.csv_logger`) and may validate at that step again, and the later row is the one
    its run went on from."""
    path = Path(path)
    if path.is_dir():
        path = path / CURVE
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        rows = [{k: _float(row.get(k)) for k in CURVE_KEYS + ("step",)} for row in csv.DictReader(f)]
    by_step = {r["step"] or 0: r for r in rows if r["val/ppl"] is not None}
    return [by_step[step] for step in sorted(by_step)]


# -- a run --------------------------------------------------------------------------------------------
@dataclass
class Run:
    name: str  # job directory (relative to its sweep's parent) or W&B run name
    family: str  # the name a report groups it by (`label_of`): the preset's name, a variant its own
    metrics: dict
    curve: list[dict] = field(default_factory=list)  # one dict per validation, CURVE_KEYS
    path: Path | None = None  # the job's directory, for a run read from disk (its saved config is there)

    @classmethod
    def at(cls, job_dir: Path, name: str | None = None) -> Run:
        """The run recorded in `job_dir` (its record may be missing: a job that never ended)."""
        job_dir = Path(job_dir)
        path = job_dir / METRICS  # read as it is: a record torn by a kill says so, rather than passing for none
        metrics = json.loads(path.read_text()) if path.is_file() else {}
        return cls(name or str(job_dir), label_of(job_dir), metrics, read_curve(job_dir), job_dir)

    @property
    def failed(self) -> bool:
        """Not completed: failed, or still running, or stopped by a signal (`unfinished`)."""
        return self.metrics.get("status") != "completed"

    @property
    def unfinished(self) -> bool:
        """Training now, or stopped by SIGTERM with its last.ckpt saved: the same command resumes it."""
        return self.metrics.get("status") in ("running", "stopped")

    @property
    def seed(self) -> int | None:
        """The seed its recorded overrides set (`seed_of`)."""
        return seed_of(str(self.metrics.get("overrides") or ""))

    @cached_property
    def choices(self) -> dict:
        return choices(self.path) if self.path is not None else {}

    @property
    def preset(self) -> str | None:
        """`ptb/lstm_fb1`: the preset it was composed with (None: none, or not read from disk)."""
        return preset_of(self.choices)

    @cached_property
    def config(self) -> dict:
        """Its saved config as plain containers ({}: none, or a W&B run)."""
        return saved_dict(self.path) if self.path is not None else {}

    @property
    def size(self) -> str | None:
        """The frontier preset's size it trained at (the tuning setting's, where that chose one)."""
        return self.metrics.get("tune/size") or self.config.get("size")

    @property
    def setting(self) -> tuple[float | None, int | None]:
        """The tuning setting it trained with, as a key (`run_setting`): (None, None) untuned."""
        return run_setting(self.metrics)

    @property
    def wall_seconds(self) -> float | None:
        """Wall-clock seconds over every segment of a resumed run (`seqbench.training.clocks.wall_seconds`)."""
        return wall_seconds(self.metrics)

    @property
    def cost_seconds(self) -> float | None:
        """Seconds of one core: a one-thread CPU run's CPU time, else its wall time, over every segment."""
        return run_seconds(self.metrics)

    def best_val_ppl(self) -> float | None:
        """The lowest validation perplexity of the history; without one, the last validation's; and for
        a language model whose history is gone and whose process never validated (resumed after its
        training had ended, before `seqbench.training.csv_logger` kept the history), its best checkpoint's
        score, exp(val/loss_best)."""
        values = [row["val/ppl"] for row in self.curve if row.get("val/ppl") is not None]
        if values:
            return min(values)
        if self.metrics.get("val/ppl") is not None:
            return self.metrics["val/ppl"]
        best_loss = self.metrics.get("val/loss_best")
        return math.exp(best_loss) if best_loss is not None and self.metrics.get("test/ppl") is not None else None

    def time_to(self, target: float, key: str = WALL_CLOCK) -> float | None:
        for row in self.curve:
            if row.get("val/ppl") is not None and row["val/ppl"] <= target and row.get(key) is not None:
                return row[key]
        return None


def read_runs(dirs: list[Path]) -> list[Run]:
    """Every job of the given sweep (or single-run) directories, failures included."""
    runs: list[Run] = []
    for root in dirs:
        if not root.is_dir():
            raise SystemExit(f"{root} is not a directory; give a multirun directory such as outputs/multiruns/<time>")
        jobs = job_dirs(root)
        known = {str(d.resolve()) for d in jobs}
        for job in jobs:
            runs.append(Run.at(job, str(job.relative_to(root.parent))))
        for outcome in last_outcomes(root).values():  # failures that never wrote a record
            if outcome.get("status") == "failed" and str(Path(outcome.get("dir", "")).resolve()) not in known:
                runs.append(Run(outcome.get("dir", "?"), f"job {outcome.get('job')}", {"status": "failed",
                                "error": outcome.get("error"), "overrides": outcome.get("overrides")}))
    if not runs:
        raise SystemExit(f"no {METRICS} under {', '.join(map(str, dirs))}: is it a seqbench run or multirun directory?")
    return runs
