"""The sweeps' memory in the repository: every finished job's record, committed, so a sweep
survives the loss of its output folder.

Only the repository survives between sessions here; `outputs/` does not. A tuning chain of hundreds of
core-hours that keeps its results only in `outputs/sweeps/` starts from nothing after every stop (it
did, once: the session of 2026-11-28 found the searches' 431 finished trials gone, and only their
committed record, `trials.csv`, left). So the resumable launcher (`hydra.launcher.archive=<dir>`, which
`python -m seqbench.protocol.campaign` sets to `experiments/sweeps/`) keeps one JSON line per finished job in
`<dir>/<sweep name>.jsonl`:

    {"key": {...}, "job": "17", "metrics": {... the job's record ...},
     "curve": [{... one validation of csv/metrics.csv ...}, ...], "archived": "<utc>"}

and on every launch, a job with no finished record of its own whose key is in the archive is
restored instead of run. What a run leaves for its readers is written to its directory: its record
(marked `restored_from`), the validation curve as `csv/metrics.csv` (the report's learning curves and
the frontier's time-to-target read it), `.hydra/` as the run saves it (composed again, then the recipe
applied as `src/train.py` applies it: the saved config shows every value used), and a `completed`
line in the sweep's `jobs.jsonl`. Whatever an earlier, killed attempt left there (a partial curve,
its checkpoints) is removed first. Every reader (the tuning record, the chain's next steps, the
reports) then reads the job as one that ran there.

A job is found by what it trains, not by its number: its `key` is the family, size, FLOPs budget, the
searched learning-rate factor and tokens per step (`seqbench.training.tune.settings`, so a `tune.per_family`
entry counts), the seed, and every other override (the preset among them: two presets of one family,
such as `probe/lstm` and `probe/lstm_fb1`, train different models) of the job's command line (`logger` and `hydra.*`
aside: they do not change what is trained). A sweep relaunched with another grid, setting or seed
misses the archive and trains, as it must.

A trial whose own record is gone but whose committed row survives can be archived from that row
(`python -m seqbench.protocol.sweep_archive from-trials <trials.csv>`): its metrics are the row's fields under
the names its record gives them, marked as rebuilt from that file, nothing guessed. Jobs archived
before the archive kept curves get theirs from their run's folder, where it still exists
(`python -m seqbench.protocol.sweep_archive add-curves <sweep dir> ...`).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from seqbench.compose import CONF_DIR, finalize, save_config
from seqbench.entry import PROJECT_ROOT
from seqbench.families import family_of
from seqbench.training.clocks import one_core
from seqbench.training.hydra_callbacks import append_line, append_outcome
from seqbench.training.record import CURVE, METRICS, completed, read_curve, read_metrics, write_metrics
from seqbench.training.tune import settings

log = logging.getLogger("seqbench")

DEFAULT_DIR = PROJECT_ROOT / "experiments" / "sweeps"
# overrides a key leaves out: what the semantic fields already hold, and what does not change the run
# (`preset` is kept: probe/lstm and probe/lstm_fb1, multi30k/bahdanau and multi30k/luong share a family)
COVERED = ("budget.flops", "size", "seed", "tune.lr_scale", "tune.tokens_per_step", "tune.per_family")
IGNORED = ("logger",)  # and what is under it: `logger.wandb.project=x` changes where a run is logged

# -- the key ----------------------------------------------------------------------------------------
def _num(value, kind):
    return None if value is None or value == "" else kind(float(value))


def _parsed(overrides: list[str]) -> dict:
    """{key: value} of overrides, read by Hydra's own parser (so `lr=0.5` and `lr=.50` agree) in one form
    (`_canonical`), `logger`
    (and what is under it) and `hydra.*` left out: they do not change what is trained."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    out = {}
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        name = override.key_or_group
        if name.split(".")[0] in IGNORED or name.startswith("hydra."):
            continue
        out[name] = _canonical(override.value())
    return out


def _canonical(value):
    """One form per value: `16.0` as 16; a dict or list as plain JSON data (a key is compared as sorted
    JSON, `key_text`, so `{a:1,b:2}` and `{b:2,a:1}` agree, and neither reads as the string "{a:1,b:2}")."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return str(value)


def rest_of(overrides: list[str]) -> dict:
    """The overrides a key keeps: all but what its own fields hold (`_parsed`)."""
    return {k: v for k, v in _parsed(overrides).items() if k not in COVERED}


def make_key(family: str, size, budget, lr_scale, tokens_per_step, seed, rest: dict) -> dict:
    return {"family": str(family), "size": None if size in (None, "") else str(size),
            "budget": _num(budget, float), "lr_scale": _num(lr_scale, float),
            "tokens_per_step": _num(tokens_per_step, int), "seed": _num(seed, int),
            "rest": {k: rest[k] for k in sorted(rest)}}


def job_key(config: DictConfig) -> dict:
    """The key of a composed job config (what the launcher holds before it runs the job)."""
    chosen = settings(config) if config.get("tune") else {}
    overrides = list(OmegaConf.select(config, "hydra.overrides.task", default=None) or [])
    return make_key(family_of(config.model), chosen.get("size") or config.get("size"),
                    OmegaConf.select(config, "budget.flops", default=None), chosen.get("lr_scale"),
                    chosen.get("tokens_per_step"), config.get("seed"), rest_of(overrides))


def same_job(ran: list[str], asked: list[str]) -> bool:
    """Whether a job directory's saved overrides (`.hydra/overrides.yaml`) and the job the sweep now asks
    for at that number are one job: the same overrides in any order (`_parsed`). Not so when a sweep
    was relaunched with another grid into the same folder: the numbers then name other jobs."""
    return _parsed(ran) == _parsed(asked)


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
                out[key_text(entry["key"])] = entry
            except (json.JSONDecodeError, KeyError, TypeError):
                log.warning("%s, line %d: not a whole record (torn by a killed process, or edited); skipped",
                            self.path, number)
        return out

    def find(self, key: dict) -> dict | None:
        return self.entries().get(key_text(key))

    def append(self, key: dict, job: str, metrics: dict, source: str | None = None,
               curve: list[dict] | None = None) -> None:
        """One job's line; a later line with the same key replaces it (`entries` keeps the last)."""
        entry = {"key": key, "job": str(job), "metrics": metrics,
                 "archived": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        if curve:
            entry["curve"] = curve
        if source:
            entry["source"] = source
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.path) + ".lock"):
            append_line(self.path, entry)


def merge(other: Path, directory: Path) -> dict[str, int]:
    """Append to `directory`'s archive the jobs of `other` (another machine's copy of it, such as the one a GPU
    session brings back: scripts/gpu_session.sh) that it lacks; sweep name -> jobs added. A job both hold
    keeps the entry it has: the later line of a key replaces the earlier (`Archive.entries`), and a run
    already read by a report or a chain's step must not change under it."""
    added = {}
    for path in sorted(Path(other).glob("*.jsonl")):
        mine = Archive(directory, path.stem)
        theirs = Archive(other, path.stem).entries()
        mine.path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(mine.path) + ".lock"):
            have = mine.entries()
            new = [entry for key, entry in theirs.items() if key not in have]
            for entry in new:
                append_line(mine.path, entry)
        if new:
            added[path.stem] = len(new)
    return added


def curve_of(job_dir: Path) -> list[dict]:
    """A finished job's validation curve, as the reports read it (`seqbench.training.record.read_curve`)."""
    return read_curve(Path(job_dir))


def restore(job_dir: Path, config: DictConfig, entry: dict, archive: Path,
            compose: Callable[[list[str]], DictConfig] | None = None) -> None:
    """Write an archived job back into `job_dir`, as a run there would have left it (the module
    docstring lists what). `config` is the job's composed sweep config (`hydra` node included);
    `compose(overrides)` composes the sweep's primary config with other overrides, for the recipe
    (`seqbench.compose.finalize`), without it the saved config is Hydra's composition alone.
    The record is written last, so a restore cut short leaves a job that is run again rather
    than one that looks finished."""
    job_dir = Path(job_dir)
    for stale in ("csv", "checkpoints"):  # an earlier attempt's, killed before it finished
        shutil.rmtree(job_dir / stale, ignore_errors=True)
    hydra_dir = job_dir / ".hydra"
    hydra_dir.mkdir(parents=True, exist_ok=True)
    overrides = list(config.hydra.overrides.task)
    task = config.copy()
    with read_write(task), open_dict(task):
        del task["hydra"]
    OmegaConf.save(task, hydra_dir / "config.yaml")
    hydra = OmegaConf.create({"hydra": OmegaConf.to_container(config.hydra, resolve=False)})
    hydra.hydra.runtime.output_dir = os.path.abspath(job_dir)  # as run_job sets it (abspath: a symlink kept)
    OmegaConf.save(hydra, hydra_dir / "hydra.yaml")
    OmegaConf.save(config.hydra.overrides.task, hydra_dir / "overrides.yaml")
    if compose is not None:
        choices = {k: v for k, v in config.hydra.runtime.choices.items() if isinstance(v, str)}
        try:
            save_config(finalize(task, overrides, choices, compose), job_dir)
        except Exception as error:  # noqa: BLE001 - the metrics are what the readers need; say what is missing
            log.warning(f"{job_dir}: the recipe could not be applied to the restored config "
                        f"({type(error).__name__}: {error}); Hydra's composition is saved instead")
    if entry.get("curve"):
        _write_curve(job_dir / CURVE, entry["curve"])
    append_outcome(job_dir.parent, {"job": config.hydra.job.num, "overrides": " ".join(overrides),
                                    "status": "completed", "dir": str(job_dir), "error": None,
                                    "restored_from": str(archive)})
    write_metrics(job_dir / METRICS, {**entry["metrics"], "restored_from": str(archive)})


def _write_curve(path: Path, curve: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = sorted({k for row in curve for k in row})
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows({k: "" if row.get(k) is None else row[k] for k in columns} for row in curve)


def add_curves(sweep_dir: Path, directory: Path) -> int:
    """Give the archived jobs of a sweep that were archived without their curve (before the archive kept
    curves) the curve of their own run, where its folder still holds it: the same job number, and its
    own record (not a restored one) equal to the archived metrics. Rewrites the file under its
    lock; returns the entries given a curve."""
    archive = Archive(directory, Path(sweep_dir).name)
    if not archive.path.is_file():
        return 0
    added = 0
    with FileLock(str(archive.path) + ".lock"):
        lines = archive.path.read_text().splitlines()
        for i, line in enumerate(lines):
            try:
                entry = json.loads(line)
                job_dir = Path(sweep_dir) / str(entry["job"])
            except (json.JSONDecodeError, KeyError, TypeError):
                continue  # not a whole record: entries() skips it too
            if not isinstance(entry.get("metrics"), dict):
                continue
            own = read_metrics(job_dir)
            if own is None:
                continue
            if entry.get("curve") or "restored_from" in own or own != entry["metrics"]:
                continue
            curve = curve_of(job_dir)
            if curve:
                lines[i] = json.dumps({**entry, "curve": curve})
                added += 1
        tmp = archive.path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(line + "\n" for line in lines))
        os.replace(tmp, archive.path)
    return added


# -- under any launcher ---------------------------------------------------------------------------------
class ArchiveCallback(Callback):
    """The archive kept by the job itself, for a launcher other than the resumable pool (which keeps it in
    its own process, before it starts a job): `hydra/launcher=submitit_local`, `submitit_slurm`, `basic`.

    As a job starts, one with no finished record in its directory whose key is in the archive is restored
    there (`restore`); `src/train.py` then finds the job finished and trains nothing. As a job ends
    finished, it is archived unless its key is there already. `python -m seqbench.protocol.campaign` adds
    it (`hydra.callbacks.archive`) when its sweeps run through another launcher: the jobs are found by key,
    whichever launcher ran them. Unlike the pool, a job here cannot tell a folder of another grid from its
    own before Hydra has rewritten that folder's overrides; give each sweep its own `hydra.sweep.dir`, as the
    campaign does."""

    def __init__(self, directory: str, archive_from: list[str] | None = None) -> None:
        self.directory, self.archive_from = Path(str(directory)), list(archive_from or [])

    def _archives(self, config: DictConfig) -> list[Archive]:
        """This sweep's archive last, so that its own entry wins (as the pool's `archive_from`)."""
        sweep = Path(str(config.hydra.sweep.dir)).name
        return [*(Archive(self.directory, name) for name in self.archive_from), Archive(self.directory, sweep)]

    def on_job_start(self, config: DictConfig, **kwargs) -> None:
        job_dir = Path(str(config.hydra.runtime.output_dir))
        if completed(job_dir):
            return
        key = _key_or_none(config)
        found = [(a, a.find(key)) for a in self._archives(config)] if key is not None else []
        found = [(a, entry) for a, entry in found if entry is not None]
        if found:
            archive, entry = found[-1]
            restore(job_dir, config, entry, archive.path)
            log.info(f"{job_dir}: restored from {archive.path}, not trained again")

    def on_job_end(self, config: DictConfig, job_return, **kwargs) -> None:
        job_dir = Path(str(config.hydra.runtime.output_dir))
        key = _key_or_none(config)
        own = self._archives(config)[-1]
        if key is not None and completed(job_dir) and own.find(key) is None:
            own.append(key, job_dir.name, read_metrics(job_dir), curve=curve_of(job_dir))


def _key_or_none(config: DictConfig) -> dict | None:
    """The job's key; None (not archived, the job runs either way) for a config it cannot be read from."""
    try:
        return job_key(config)
    except Exception as error:  # noqa: BLE001 - a task that is not a seqbench training run
        log.warning(f"job not archived: its key could not be read ({type(error).__name__}: {error})")
        return None


# -- rows of a committed trials.csv (seqbench.protocol.tuning_report) -----------------------------------
def metrics_of_row(row: dict) -> dict:
    """The row's fields under a run record's names (the inverse of `tuning_trials.from_metrics`); a
    diverged trial keeps a null loss, as `seqbench.training.run` wrote it."""
    def number(name):
        return None if row.get(name) in (None, "") else float(row[name])

    steps, used = number("steps"), number("tokens_per_step")
    out = {"status": "completed", "val/loss_best": number("val_loss_best"), "budget/flops": number("budget_flops"),
           "tune/lr_scale": number("lr_scale"),
           "tune/recipe_lr": number("recipe_lr"), "tune/lr": number("lr"), "budget/max_steps": steps,
           "wall_time_s": number("wall_time_s"), "tune/schedule": row.get("schedule") or None,
           "hardware": row.get("hardware") or None, "git_commit": row.get("git_commit") or None,
           "params_non_embedding": number("params_non_embedding"), "tune/size": row.get("size") or None}
    if row.get("device"):  # which clock cost_s is (seqbench.training.clocks): the CPU seconds kept as the run wrote them
        out["device"] = row["device"]
        if one_core(row["device"]) and number("cost_s") is not None:
            out["cpu_time_s"] = number("cost_s")
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
                           source=f"rebuilt from {path}: the job's own {METRICS} was lost with its outputs")
            held[key_text(key)] = key
            added[sweep] = added.get(sweep, 0) + 1
    return added


def experiment_of(sweep: str) -> str:
    """The tuning experiment a search sweep belongs to (`tune_frontier_ptb_edge_lr` -> `tune_frontier_ptb`)."""
    return sweep.removesuffix("_untuned").removesuffix("_edge_tokens").removesuffix("_edge_lr")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seqbench.protocol.sweep_archive", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rebuild = sub.add_parser("from-trials", help="archive the finished rows of committed trials.csv / baseline.csv files")
    rebuild.add_argument("csv", nargs="+", type=Path)
    rebuild.add_argument("--archive", type=Path, default=DEFAULT_DIR)
    curves = sub.add_parser("add-curves", help="give archived jobs of these sweep folders the curves their runs left")
    curves.add_argument("sweep_dir", nargs="+", type=Path)
    curves.add_argument("--archive", type=Path, default=DEFAULT_DIR)
    merging = sub.add_parser("merge", help="add the jobs another copy of the archive holds and this one lacks")
    merging.add_argument("other", type=Path, help="the other archive's folder (its <sweep>.jsonl files)")
    merging.add_argument("--archive", type=Path, default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    if args.command == "merge":
        added = merge(args.other, args.archive)
        for sweep, count in added.items():
            print(f"{sweep}: {count} job(s) added from {args.other}")
        print(f"{sum(added.values())} job(s) added in all")
        return 0
    if args.command == "add-curves":
        for sweep_dir in args.sweep_dir:
            print(f"{sweep_dir.name}: {add_curves(sweep_dir, args.archive)} job(s) given their curve")
        return 0
    # the chain is needed by this command alone; the launcher imports this module at every sweep's start
    from seqbench.protocol.chain import Chain
    from seqbench.protocol.final_cells import Experiment

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
