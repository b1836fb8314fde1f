"""Does every pair of the matrix train *well* from `model=X data=Y` alone? A fixed budget per pair.

    python -m seqbench.analysis.matrix_check                       # every ✓ pair, 60 s of training each
    python -m seqbench.analysis.matrix_check --pairs lstm:sst2 gru:adding --budget 60 --out <dir>
    python -m seqbench.analysis.matrix_check --pairs "lstm:multi30k model.attention=bahdanau"

A pair may carry overrides after it (quoted, as above): the README's own lines such as
`model=lstm data=multi30k model.attention=bahdanau` are checked as written, beside the bare pairs
(`README_LINES`, run by default after the ✓ pairs).

Each pair runs as a user would type it — `python src/train.py model=X data=Y` with nothing else but a
wall-clock budget (`trainer.max_time`), 20 validation and 20 test batches — and its test metric is set
beside the task's trivial baseline, computed from the same corpus: the majority class (classification,
images), the training unigram's perplexity (language models), an all-`O` tagger (entity F1 0), the
probes' own baselines (copy: log 8 and 1/8; selective copying: log 16; adding: 1/6; recall: 1/8), BLEU 0 for translation, a
uniform guess over the target vocabulary for span corruption's perplexity, chance for next-sentence
prediction. Corpora without an offline copy (WikiText-2, CIFAR-10) are skipped unless
`$SEQBENCH_DATA_DIR` holds them. The runs go under `--out`/runs; `matrix_check.csv`, `matrix_check.md`
and their ledger record (`record.json`: command, commit, CPU, date) go to `--report` (default: `--out`), so
a page's table can be generated from a folder under `experiments/` without the runs' checkpoints in it:

    python -m seqbench.analysis.matrix_check --models mingru minlstm ssm --budget 60 --threads 1 \
        --report experiments/figures/matrix-check-parallel      # one family's (or several) ✓ pairs
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from seqbench.analysis.matrix import pairs
from seqbench.compose import compose_final
from seqbench.entry import PROJECT_ROOT, register_resolvers
from seqbench.provenance import hardware, write_record
from seqbench.tables import table_lines
from seqbench.training.record import read_metrics
from seqbench.training.run import instantiate

# (metric reported, higher is better) per data config
METRIC = {"lm": ("test/ppl", False), "classification": ("test/acc", True), "image": ("test/acc", True),
          "tagging": ("test/f1", True), "regression": ("test/mse", False), "translation": ("test/bleu", True),
          "mlm": ("test/mlm_loss", False)}
PROBE_METRIC = {"copy": ("test/loss", False), "selective_copy": ("test/loss", False), "adding": ("test/mse", False),
                "recall": ("test/acc", True)}
PROBE_BASELINE = {"copy": math.log(8), "selective_copy": math.log(16), "adding": 1 / 6, "recall": 1 / 8}
FIXED = {"translation": 0.0, "tagging": 0.0}  # BLEU, entity F1 of an all-O tagger
# BERT pre-training is judged by its masked-LM loss against the training unigram's cross-entropy on the
# test pieces (what a model that ignores the context can reach). NSP is reported beside it, not judged:
# it is the secondary objective, learned late at small scale, and RoBERTa (Liu et al. 2019) drops it.
SPAN = "multi30k_span"  # translation-shaped, but scored by the spans' perplexity
USER_TEXT = ["data.train_file={d}/ptb/ptb.train.txt", "data.valid_file={d}/ptb/ptb.valid.txt",
             "data.test_file={d}/ptb/ptb.test.txt"]  # data=text needs files: PTB's, as a user would pass them


# The README's lines that add one override to a pair: checked as written, by default after the pairs.
README_LINES = [("lstm", "sst2", ("model.bidirectional=true",)), ("lstm", "multi30k", ("model.attention=bahdanau",)),
                ("lstm", "mnist", ("data.as_sequence=rows",))]


def parse_pair(spec: str) -> tuple[str, str, tuple[str, ...]]:
    """`model:data [override ...]` -> (model, data, overrides)."""
    words = spec.split()
    model, _, data = words[0].partition(":")
    if not model or not data:
        raise SystemExit(f"--pairs takes model:data [override ...], got {spec!r}")
    return model, data, tuple(words[1:])


def run_name(model: str, data: str, extra: tuple[str, ...]) -> str:
    return "-".join([model, data, *(e.replace("=", "_").replace("/", "_") for e in extra)])


def metric_of(data: str, task: str) -> tuple[str, bool]:
    if data in PROBE_METRIC:
        return PROBE_METRIC[data]
    return ("test/ppl", False) if data == SPAN else METRIC[task]


def baseline(data: str, task: str, data_dir: Path, cache: dict) -> float | None:
    """The trivial baseline of the test metric on this corpus."""
    if data in PROBE_BASELINE:
        return PROBE_BASELINE[data]
    if task in FIXED and data != SPAN:
        return FIXED[task]
    if data in cache:
        return cache[data]

    register_resolvers()
    extra = [a.format(d=data_dir) for a in USER_TEXT] if data == "text" else []
    cfg = compose_final([f"data={data}", "model=lstm" if task != "image" else "model=cnn", *extra])
    dm = instantiate(cfg.data, "data")
    dm.prepare_data()
    dm.setup("fit")
    if data == SPAN:  # span corruption's targets: a uniform guess over the target vocabulary
        value = float(dm.spec.tgt_vocab_size)
    elif task == "lm":
        value = _unigram_ppl(dm.streams["train"].tolist(), dm.streams["test"].tolist())
    elif task == "mlm":
        special = {dm.spec.pad_id, *(dm.spec.extras[k] for k in ("cls_id", "sep_id", "mask_id"))}
        pieces = {split: [t for ids, _, _ in dm.pairs[split] for t in ids if t not in special] for split in ("train", "test")}
        value = math.log(_unigram_ppl(pieces["train"], pieces["test"]))
    elif task == "image":
        labels = dm.splits["test"].labels.tolist()
        value = Counter(labels).most_common(1)[0][1] / len(labels)
    elif task == "classification":
        train = Counter(int(ex[1]) if isinstance(ex, tuple) else int(ex["label"]) for ex in _examples(dm, "train"))
        test = [int(ex[1]) if isinstance(ex, tuple) else int(ex["label"]) for ex in _examples(dm, "test")]
        majority = train.most_common(1)[0][0]
        value = sum(label == majority for label in test) / len(test)
    else:
        value = None
    cache[data] = value
    return value


def _examples(dm, split: str):
    for name in ("examples", "data", "splits"):
        store = getattr(dm, name, None)
        if isinstance(store, dict) and split in store:
            return store[split]
    raise AttributeError(f"cannot read the {split} labels of {type(dm).__name__}")


def _unigram_ppl(train: list[int], test: list[int]) -> float:
    """Perplexity of the training unigram (add-one) on the test stream: what a model learns first."""
    counts, total, vocab = Counter(train), len(train), max(max(train), max(test)) + 1
    nll = -sum(math.log((counts[t] + 1) / (total + vocab)) for t in test) / len(test)
    return math.exp(nll)


def verdict(value: float | None, base: float | None, higher: bool) -> str:
    """Whether a pair's test metric beats its task's trivial baseline (higher or lower is better)."""
    if value is None:
        return "failed"
    if base is None:
        return "no baseline"
    return "beats baseline" if (value > base if higher else value < base) else "NOT better than baseline"


def run_pair(model: str, data: str, extra: tuple[str, ...], budget_s: int, out: Path, data_dir: Path,
             threads: int | None) -> dict:
    name = run_name(model, data, extra)
    args = [f"model={model}", f"data={data}", *extra, f"trainer.max_time=00:00:{budget_s // 60:02d}:{budget_s % 60:02d}",
            "trainer.limit_val_batches=20", "trainer.limit_test_batches=20", "logger=csv",
            f"hydra.run.dir={out / 'runs' / name}"]
    if data == "text":
        args += [a.format(d=data_dir) for a in USER_TEXT]
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    started = time.time()
    proc = subprocess.run([sys.executable, str(PROJECT_ROOT / "src" / "train.py"), *args], capture_output=True,
                          text=True, env=env, cwd=PROJECT_ROOT)
    metrics = read_metrics(out / "runs" / name) or {}
    if proc.returncode and not metrics.get("error"):
        metrics["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1]
    metrics["command_s"] = time.time() - started
    saved = out / "runs" / name / ".hydra" / "config.yaml"
    if saved.is_file():  # the recipe the run applied, as its saved config names it
        import yaml

        metrics["recipe"] = (yaml.safe_load(saved.read_text()) or {}).get("recipe")
    return metrics


def main(argv: list[str] | None = None) -> list[dict]:
    from hydra.utils import get_class
    from omegaconf import OmegaConf

    parser = argparse.ArgumentParser(prog="python -m seqbench.analysis.matrix_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", nargs="*", help="model:data pairs (default: every ✓ of the matrix)")
    parser.add_argument("--budget", type=int, default=60, help="seconds of training per pair")
    parser.add_argument("--threads", type=int, help="OMP_NUM_THREADS of each run (default: torch's)")
    parser.add_argument("--models", nargs="*", help="only the ✓ pairs of these models (default: all)")
    parser.add_argument("--out", type=Path, default=Path("outputs/matrix_check"), help="where the runs go")
    parser.add_argument("--report", type=Path, help="where the table, its CSV and record go (default: --out)")
    args = parser.parse_args(argv)
    started, report = time.time(), args.report or args.out
    report.mkdir(parents=True, exist_ok=True)
    data_dir = Path(os.environ.get("SEQBENCH_DATA_DIR", PROJECT_ROOT / "data"))
    todo = [parse_pair(p) for p in args.pairs] if args.pairs else [(m, d, ()) for m, d in pairs()] + README_LINES
    if args.models:
        unknown = set(args.models) - {m for m, _, _ in todo}
        if unknown:
            parser.error(f"no ✓ pair has the model(s) {sorted(unknown)}")
        todo = [t for t in todo if t[0] in args.models]
    args.out.mkdir(parents=True, exist_ok=True)
    cache: dict = {}
    rows = []
    for model, data, extra in todo:
        task = get_class(OmegaConf.load(PROJECT_ROOT / "conf" / "data" / f"{data}.yaml")._target_).task
        name, higher = metric_of(data, task)
        row = {"model": model, "data": data, "extra": " ".join(extra), "task": task, "metric": name, "budget_s": args.budget}
        try:
            row["baseline"] = baseline(data, task, data_dir, cache)
        except Exception as exc:  # a corpus not available here: the pair is skipped, and says why
            rows.append({**row, "result": None, "verdict": f"skipped: {type(exc).__name__}: {exc}".split("\n")[0]})
            print(rows[-1], flush=True)
            _write(rows, report, args.threads)  # a skipped pair is a row too, also the last one
            continue
        metrics = run_pair(model, data, extra, args.budget, args.out, data_dir, args.threads)
        value = metrics.get(name)
        row.update(result=value, recipe=metrics.get("recipe"), tokens=metrics.get("curve/tokens"),
                   error=metrics.get("error"), command_s=round(metrics["command_s"], 1))
        row["verdict"] = verdict(value, row["baseline"], higher)
        rows.append(row)
        print(row, flush=True)
        _write(rows, report, args.threads)
        write_record(report, ["matrix_check.csv", "matrix_check.md"], "python -m seqbench.analysis.matrix_check "
                     + " ".join(sys.argv[1:] if argv is None else argv), started)
    return rows


def _write(rows: list[dict], out: Path, threads: int | None = None) -> None:
    keys = ["model", "data", "extra", "task", "metric", "result", "baseline", "verdict", "recipe", "tokens", "budget_s",
            "command_s", "error"]
    with open(out / "matrix_check.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    fmt = lambda v: "" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))  # noqa: E731
    per_run = threads or os.environ.get("OMP_NUM_THREADS", "torch's default")
    def command(r: dict) -> str:
        return " ".join(filter(None, [f"model={r['model']} data={r['data']}", r.get("extra")]))

    cells = [[f"`{command(r)}`", r["metric"], fmt(r.get("result")), fmt(r.get("baseline")), r["verdict"]] for r in rows]
    lines = [f"CPU: {hardware().split(', torch')[0]}, torch threads per run: {per_run}", "",
             *table_lines(["command", "metric", "result", "trivial baseline", "verdict"], cells, align="llrrl")]
    (out / "matrix_check.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
