"""The sweeps' memory in the repository: every finished job's `metrics.json`, committed, so a sweep
survives the loss of its output folder.

Only the repository survives between sessions here; `outputs/` does not. A tuning chain of hundreds of
core-hours that keeps its results only in `outputs/sweeps/` starts from nothing after every stop (it
did, once: the session of 2026-11-28 found the searches' 431 finished trials gone, and only their
committed record, `trials.csv`, left). So the resumable launcher (`hydra.launcher.archive=<dir>`, which
`python -m seqbench.campaign` sets to `experiments/sweeps/`) keeps one JSON line per finished job in
`<dir>/<sweep name>.jsonl`:

    {"key": {...}, "job": "17", "metrics": {... the job's metrics.json ...}, "archived": "<utc>"}

and on every launch, a job with no finished `metrics.json` of its own whose key is in the archive is
restored instead of run: its `metrics.json` (marked `restored_from`) and its `.hydra/` files (composed
again, as Hydra would write them) are written to its directory, and every reader (the tuning record,
the chain's next steps, the reports) reads it as it reads a job that ran there.

A job is found by what it trains, not by its number: its `key` is the family, size, FLOPs budget, the
searched learning-rate factor and tokens per step (`seqbench.tuning.settings`, so a `tune.per_family`
entry counts), the seed, and every other override (the preset among them: two presets of one family,
such as `probe/lstm` and `probe/lstm_fb1`, train different models) of the job's command line (`logger` and `hydra.*`
aside: they do not change what is trained). A sweep relaunched with another grid, setting or seed
misses the archive and trains, as it must.

A trial whose own `metrics.json` is gone but whose committed row survives can be archived from that row
(`python -m seqbench.sweep_archive from-trials <trials.csv>`): its metrics are the row's fields under
the names `metrics.json` gives them, marked as rebuilt from that file, nothing guessed.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import sys
import time
from pathlib import Path

from filelock import FileLock
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

log = logging.getLogger("seqbench")

REPO = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO / "experiments" / "sweeps"
# overrides a key leaves out: what the semantic fields already hold, and what does not change the run
# (`preset` is kept: probe/lstm and probe/lstm_fb1, multi30k/bahdanau and multi30k/luong share a family)
COVERED = ("budget.flops", "size", "seed", "tune.lr_scale", "tune.tokens_per_step", "tune.per_family")
IGNORED = ("logger",)


# -- the key ----------------------------------------------------------------------------------------
def _num(value, kind):
    return None if value is None or value == "" else kind(float(value))


def rest_of(overrides: list[str]) -> dict:
    """The overrides a key keeps, parsed by Hydra's own parser (so `lr=0.5` and `lr=.50` agree)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    out = {}
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        name = override.key_or_group
        if name in COVERED or name in IGNORED or name.startswith("hydra."):
            continue
        value = override.value()
        out[name] = value if value is None or isinstance(value, (bool, int, float, str)) else str(value)
    return out


def make_key(family: str, size, budget, lr_scale, tokens_per_step, seed, rest: dict) -> dict:
    return {"family": str(family), "size": None if size in (None, "") else str(size),
            "budget": _num(budget, float), "lr_scale": _num(lr_scale, float),
            "tokens_per_step": _num(tokens_per_step, int), "seed": _num(seed, int),
            "rest": {k: rest[k] for k in sorted(rest)}}


def job_key(config: DictConfig) -> dict:
    """The key of a composed job config (what the launcher holds before it runs the job)."""
    from seqbench.families import family_of
    from seqbench.tuning import settings

    chosen = settings(config) if config.get("tune") else {}
    overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=None) or [])
    return make_key(family_of(config.model), chosen.get("size") or config.get("size"),
                    OmegaConf.select(config, "budget.flops", default=None), chosen.get("lr_scale"),
                    chosen.get("tokens_per_step"), config.get("seed"), rest_of(overrides))


def key_text(key: dict) -> str:
    """A key as canonical JSON, to look it up."""
    return json.dumps(key, sort_keys=True)


# -- the archive file -------------------------------------------------------------------------------
class Archive:
    """One sweep's archived jobs: `<dir>/<sweep name>.jsonl`, appended under a file lock."""

    def __init__(self, directory: Path, sweep: str):
        self.path = Path(directory) / f"{sweep}.jsonl"

    def entries(self) -> dict[str, dict]:
        """Key (as canonical JSON) -> its last entry. A torn line (a process killed while writing it)
        is skipped with a warning."""
        out: dict[str, dict] = {}
        lines = self.path.read_text().splitlines() if self.path.is_file() else []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                log.warning("%s, line %d: not a whole record (torn by a killed process); skipped", self.path, number)
                continue
            out[key_text(entry["key"])] = entry
        return out

    def find(self, key: dict) -> dict | None:
        return self.entries().get(key_text(key))

    def append(self, key: dict, job: str, metrics: dict, source: str | None = None) -> None:
        """One job's line; a later line with the same key replaces it (`entries` keeps the last)."""
        from seqbench.hydra_callbacks import append_line

        entry = {"key": key, "job": str(job), "metrics": metrics,
                 "archived": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if source:
            entry["source"] = source
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path) + ".lock"):
            append_line(self.path, entry)


def restore(job_dir: Path, config: DictConfig, entry: dict, archive: Path) -> None:
    """Write an archived job back: its `.hydra/` files as Hydra's `run_job` writes them (the task
    config without `hydra`, the `hydra` node, the task overrides), then its `metrics.json`, last, so
    a restore cut short leaves a job that is run again rather than one that looks finished."""
    hydra_dir = Path(job_dir) / ".hydra"
    hydra_dir.mkdir(parents=True, exist_ok=True)
    task = config.copy()
    with read_write(task), open_dict(task):
        del task["hydra"]
    OmegaConf.save(task, hydra_dir / "config.yaml")
    OmegaConf.save(OmegaConf.create({"hydra": config.hydra}), hydra_dir / "hydra.yaml")
    OmegaConf.save(config.hydra.overrides.task, hydra_dir / "overrides.yaml")
    metrics = {**entry["metrics"], "restored_from": str(archive)}
    tmp = Path(job_dir) / "metrics.json.tmp"
    tmp.write_text(json.dumps(metrics, indent=2, sort_keys=True))
    os.replace(tmp, Path(job_dir) / "metrics.json")


# -- rows of a committed trials.csv (seqbench.analysis.tuning_report) -----------------------------------
def metrics_of_row(row: dict) -> dict:
    """The row's fields under metrics.json's names (the inverse of `tuning_trials.from_metrics`); a
    diverged trial keeps a null loss, as `seqbench.run` wrote it."""
    def number(name):
        return None if row.get(name) in (None, "") else float(row[name])

    steps, used = number("steps"), number("tokens_per_step")
    out = {"status": "completed", "val/loss_best": number("val_loss_best"), "budget/flops": number("budget_flops"),
           "tune/lr_scale": number("lr_scale"),
           "tune/recipe_lr": number("recipe_lr"), "tune/lr": number("lr"), "budget/max_steps": steps,
           "wall_time_s": number("wall_time_s"), "tune/schedule": row.get("schedule") or None,
           "hardware": row.get("hardware") or None, "git_commit": row.get("git_commit") or None,
           "params_non_embedding": number("params_non_embedding"), "tune/size": row.get("size") or None}
    if row.get("tokens_per_step_grid"):
        out["tune/tokens_per_step"] = used
    elif used is not None and steps:
        out["curve/tokens"] = used * steps  # an untuned recipe's own batch: tokens over steps
    if row.get("status") == "diverged":
        out["val/loss"] = None
    return {k: v for k, v in out.items() if v is not None or k in ("val/loss_best", "val/loss")}


def from_trials(path: Path, directory: Path, seed: int, untuned: list[str], presets: dict[str, str]) -> dict[str, int]:
    """Archive each finished row of a committed trials.csv (or baseline.csv) whose job is not archived
    yet; returns rows archived per sweep. `untuned`: the untuned sweep's overrides, whose `rest`
    (`tune.schedule=null`) its jobs carry; every other sweep of the search carries only its experiment.
    `presets`: family -> the preset its jobs ran (the search's `preset` axis)."""
    added: dict[str, int] = {}
    known: dict[str, dict] = {}  # sweep -> its archived keys, read once
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        if row.get("status") not in ("completed", "diverged"):
            continue  # failed or unfinished: the relaunch runs it
        sweep, job = row["job"].rsplit("/", 1)
        rest = {**(rest_of(untuned) if sweep.endswith("_untuned") else {"experiment": experiment_of(sweep)}),
                "preset": presets[row["family"]]}
        grid = row.get("tokens_per_step_grid") or None
        key = make_key(row["family"], row.get("size"), row.get("budget_flops"), row.get("lr_scale"), grid, seed, rest)
        archive = Archive(directory, sweep)
        held = known.setdefault(sweep, archive.entries())
        if key_text(key) not in held:
            archive.append(key, job, metrics_of_row(row),
                           source=f"rebuilt from {path}: the job's own metrics.json was lost with its outputs")
            held[key_text(key)] = key
            added[sweep] = added.get(sweep, 0) + 1
    return added


def experiment_of(sweep: str) -> str:
    """The tuning experiment a search sweep belongs to (`tune_frontier_ptb_edge_lr` -> `tune_frontier_ptb`)."""
    return sweep.removesuffix("_untuned").removesuffix("_edge_tokens").removesuffix("_edge_lr")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seqbench.sweep_archive", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rebuild = sub.add_parser("from-trials", help="archive the finished rows of committed trials.csv / baseline.csv files")
    rebuild.add_argument("csv", nargs="+", type=Path)
    rebuild.add_argument("--archive", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    from seqbench.campaign import Chain
    from seqbench.compose import CONF_DIR
    from seqbench.final_cells import Experiment

    seed = int(OmegaConf.load(CONF_DIR / "train.yaml").seed)  # the search ran at the config's seed
    for path in args.csv:
        with open(path, newline="") as f:
            first = next(csv.DictReader(f), None)
        if first is None:
            continue
        experiment = experiment_of(first["job"].split("/")[0])
        untuned = Chain(experiment, Path(".")).untuned()[0][1]
        presets = Experiment(experiment).presets
        for sweep, count in from_trials(path, args.archive, seed, untuned, presets).items():
            print(f"{sweep}: {count} job(s) archived from {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
