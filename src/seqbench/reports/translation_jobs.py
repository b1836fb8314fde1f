"""The translation sweeps' jobs as the table and the verdict count them: family, label smoothing, seed, status.

A job's family and seed come from its saved config (`.hydra/config.yaml`), the label smoothing it trained with
(`model.label_smoothing`), the epochs it was given and whether its vocabulary is the joint one (T5's); a job
that failed before writing its config, from its command line in the launcher's record. The epochs it trained
and its best validation BLEU come from its CSV history. Split from `translation_table` so that the table
(`translation_table`) and the verdict the findings read (`translation_verdict`) group jobs one way.
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from seqbench.families import family_of
from seqbench.training.record import Run
from seqbench.training.saved_yaml import load_dict


@dataclass
class Job:
    family: str
    smoothing: float
    seed: int | None
    run: Run
    joint_vocab: bool
    epochs_given: int | None
    epochs_trained: int | None
    model: str | None = None            # the registry family of its model (the Bahdanau preset's GRU): its kind
    attention_layer: str | None = None  # a recurrent model's attention (`model.attention`: bahdanau, none)
    val_bleu: float | None = None       # its best validation BLEU (greedy): what a family is chosen on


def _history(job_dir: Path) -> tuple[int | None, float | None]:
    """From the run's CSV history: the epochs trained, 1 + the last epoch that ended (its `train/loss_epoch`
    rows; Lightning numbers epochs from 0, and logs the test with the epoch count after the last, which no
    epoch trained), and the best validation BLEU."""
    path = job_dir / "csv" / "metrics.csv"
    if not path.is_file():
        return None, None
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    epochs = [int(float(r["epoch"])) for r in rows if r.get("epoch") and r.get("train/loss_epoch")]
    bleu = [float(r["val/bleu"]) for r in rows if r.get("val/bleu")]
    return (max(epochs) + 1 if epochs else None), (max(bleu) if bleu else None)


def _override(run: Run, key: str) -> str | None:
    """`key`'s value on the job's command line (`overrides`: a string in its record, a list in the launcher's
    record of a job that failed before writing one)."""
    words = run.metrics.get("overrides") or ""
    words = words.split() if isinstance(words, str) else [str(w) for w in words]
    return next((w.split("=", 1)[1] for w in words if w.lstrip("+").startswith(f"{key}=")), None)


def job_of(run: Run) -> Job:
    """A job's family, smoothing and seed from its saved config; a failed job that left no folder, from its
    command line (the preset's family, the smoothing given, else the experiment's)."""
    config = load_dict(run.path / ".hydra" / "config.yaml") if run.path and (run.path / ".hydra").is_dir() else {}
    model, data, trainer = (config.get(k) or {} for k in ("model", "data", "trainer"))
    family, smoothing = run.family, model.get("label_smoothing")
    if not config:
        preset = _override(run, "preset")
        family = preset.rsplit("/", 1)[-1] if preset else run.family
        smoothing = _override(run, "model.label_smoothing")
    seed = run.seed or config.get("seed") or (int(_override(run, "seed")) if _override(run, "seed") else None)
    epochs, val_bleu = _history(run.path) if run.path else (None, None)
    return Job(family, float(smoothing or 0.0), seed, run, bool(data.get("joint_vocab")), trainer.get("max_epochs"),
               epochs, family_of(model) if model.get("_target_") else None,
               str(model["attention"]) if model.get("attention") is not None else None, val_bleu)


def check_unique(jobs: list[Job]) -> None:
    """Two completed runs of one family, smoothing and seed (a rerun, or one sweep given twice) would count
    as two seeds and make the pairing depend on the order of the folders: stop, naming them."""
    seen: dict[tuple, str] = {}
    for j in jobs:
        if j.run.failed:
            continue
        key = (j.family, j.smoothing, j.seed)
        if key in seen:
            raise SystemExit(f"{seen[key]} and {j.run.name} are both {j.family}, label smoothing {j.smoothing:g}, "
                             f"seed {j.seed}: give each run once")
        seen[key] = j.run.name


def completed(jobs: list[Job]) -> dict[float, dict[str, list[Job]]]:
    """Completed jobs with a test BLEU by label smoothing (largest first), then family, in seed order."""
    by: dict[float, dict[str, list[Job]]] = {}
    for j in sorted(jobs, key=lambda j: (-j.smoothing, j.seed or 0)):
        if not j.run.failed and j.run.metrics.get("test/bleu") is not None:
            by.setdefault(j.smoothing, {}).setdefault(j.family, []).append(j)
    return by


def not_ended(jobs) -> dict[str, list[Job]]:
    """By family, the jobs that have not ended well: running, or failed (their status, the launcher's record)."""
    by: dict[str, list[Job]] = {}
    for j in jobs:
        if j.run.failed:
            by.setdefault(j.family, []).append(j)
    return by


def statuses(jobs: list[Job]) -> str:
    """`2 running`, `1 failed, 1 running`: what became of the jobs that have no score."""
    counts = Counter(str(j.run.metrics.get("status") or "failed") for j in jobs)
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
