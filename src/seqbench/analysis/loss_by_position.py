"""Where along the held-out text a language model's loss lies: in bins by distance from the training text.

Tiny Shakespeare's validation tenth follows its training text, and the tuned frontier selects on the
tenth's first half and scores on its second (`data.heldout_score=true`, `seqbench.data.shakespeare.split`).
A model that learns the training text's neighbourhood (its play, its characters' names) gains on the
near half more than on the far one, and a selection on the near half favours it. At 1e14 FLOPs the tuned
RNN's selection loss kept falling while its held-out score rose above the 1e13 run's; this shows whether
that gap grows with the distance from the training text.

Every token of the evaluation text is read once with everything before it as context (the last `--warm`
tokens of the training split first, so the text's first tokens are not read cold; a recurrent model
carries its state through, an attention model reads its trained window: `context_usage.full_context_losses`),
and the mean loss is reported per bin of position, and per split.

    python -m seqbench.analysis.loss_by_position <run dirs, sweep dirs or .ckpt files> [--bins 10] [--out DIR]
        [--mark 'PROSPERO:' ...]   # where a text first appears in it: a play the training text lacks begins

The evaluation text is valid, then test, in order: on Tiny Shakespeare with `data.heldout_score=true`, the
validation tenth as it follows the training text (without it, valid and test are the same tenth, read once).
On a corpus whose splits are separate texts (PTB), the bins follow valid, then test.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import statistics
import sys
import time
from pathlib import Path

import torch

from seqbench.analysis.context_usage import full_context_losses, load_all, nll
from seqbench.provenance import write_record
from seqbench.tables import table_lines
from seqbench.training.record import seed_of


def evaluation_text(streams: dict[str, torch.Tensor], warm: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(stream, positions, split_at): the last `warm` training tokens, then valid, then test (valid once where
    test is the same text); the positions of every evaluated token in it (with no training tokens before it,
    valid's first token has nothing to be predicted from, as in the ordinary evaluation); and how many of
    them are valid's."""
    valid, test = streams["valid"], streams["test"]
    evaluated = valid if torch.equal(valid, test) else torch.cat([valid, test])
    start = min(warm, streams["train"].numel())
    stream = torch.cat([streams["train"][streams["train"].numel() - start:], evaluated])
    first = max(start, 1)
    return stream, torch.arange(first, stream.numel()), start + valid.numel() - first


@torch.inference_mode()
def every_token_losses(model, stream: torch.Tensor, first: int, chunk: int = 2048) -> torch.Tensor:
    """The loss of every token of `stream` from position `first` on, each with everything before it: a
    recurrent model (`lm_batching == "stream"`) in one pass, `chunk` tokens a call with its state carried
    (the logits of every step at once; `context_usage.full_context_losses` asks one call per target, which
    for every token of a split is 100,000 calls); an attention model from its trained window, as there."""
    if getattr(model, "lm_batching", None) != "stream":
        return full_context_losses(model, stream, torch.arange(first, stream.numel()))
    out, state = [], None
    for at in range(0, stream.numel() - 1, chunk):
        targets = stream[at + 1 : at + chunk + 1]  # step j of the read predicts the token after it
        logits, state = model.net(stream[None, at : at + targets.numel()].to(model.device), state)
        out.append(nll(logits[0].cpu(), targets))
    return torch.cat(out)[first - 1 :]


def binned(losses: torch.Tensor, bins: int) -> list[float]:
    """The mean of each of `bins` contiguous, near-equal parts of `losses`, in order."""
    return [part.mean().item() for part in torch.tensor_split(losses, bins)]


def passes(lm) -> float | None:
    """How many times the run read its training split (`curve/tokens` of its record over the split's
    tokens): at ten times the compute a small model reads a small corpus ten times as often."""
    tokens = lm.metrics.get("curve/tokens")
    return None if tokens is None else tokens / lm.datamodule.streams["train"].numel()


def measure(lm, bins: int, warm: int, marks: dict[str, int | None] | None = None) -> dict:
    """One model's row: its mean loss per bin, on valid and on test, over the whole evaluation text, and in
    each stretch the marks and the start of test cut it into (`stretches`)."""
    stream, positions, split_at = evaluation_text(lm.datamodule.streams, warm)
    losses = every_token_losses(lm.model.eval(), stream, int(positions[0]))
    return {"run": lm.name, "family": lm.family, "corpus": lm.corpus,
            "params_non_embedding": lm.model.num_params(non_embedding=True), "tokens": losses.numel(),
            "budget": lm.metrics.get("budget/flops"), "seed": seed_of(lm.metrics.get("overrides") or ""),
            "passes": passes(lm), "train_loss": lm.metrics.get("train/loss_epoch"),
            "valid": losses[:split_at].mean().item(),
            "test": losses[split_at:].mean().item() if split_at < losses.numel() else None,
            "recorded_test_loss": lm.test_loss, "bins": binned(losses, bins),
            "stretches": stretches(losses, split_at, marks or {})}


def stretches(losses: torch.Tensor, split_at: int, marks: dict[str, int | None]) -> dict[str, float]:
    """The mean loss of each stretch of the evaluation text between its cuts (the start of test, and where each
    mark first appears), named by its split and the last mark before it: on Tiny Shakespeare, the selection
    half's and the score half's share of a play the training text began, and the score half's share of one it
    lacks."""
    cuts = sorted({0, *([split_at] if split_at < losses.numel() else []),
                   *(at for at in marks.values() if at is not None)})
    found = sorted((at, mark) for mark, at in marks.items() if at is not None)
    out = {}
    for start, end in zip(cuts, [*cuts[1:], losses.numel()]):
        split = "valid" if start < split_at else "test"
        last = [mark for at, mark in found if at <= start]
        out[f"{split}, " + (f"from `{last[-1]}`" if last else "before the marks")] = losses[start:end].mean().item()
    return out


def first_mark(pieces: list[str], mark: str) -> int | None:
    """The index of the token where `mark` first begins in the text the tokens `pieces` spell, or None."""
    text, starts, at = "".join(pieces), [], 0
    for piece in pieces:
        starts.append(at)
        at += len(piece)
    found = text.find(mark)
    return None if found < 0 else bisect.bisect_right(starts, found) - 1


def mark_positions(datamodule, warm: int, marks: list[str]) -> tuple[dict[str, int | None], int]:
    """Where each of `marks` (a speaker's name, a title) first appears in the evaluation text, as the index of
    its evaluated token (None where it does not), and how many tokens the text has."""
    stream, positions, _ = evaluation_text(datamodule.streams, warm)
    space = "" if getattr(datamodule, "level", "char") == "char" else " "  # words and pieces: one space after each
    pieces = [datamodule.tokenizer.decode([i]) + space for i in stream[positions].tolist()]
    return {mark: first_mark(pieces, mark) for mark in marks}, len(pieces)


def marks_table(marks: dict[str, int | None], tokens: int, bins: int) -> str:
    """Where each mark first appears in the evaluation text: its token, its share of the text, and its bin."""
    edges = [int(part[0]) for part in torch.tensor_split(torch.arange(tokens), bins)]
    return "\n".join(table_lines(["mark", "first at token", "of", "share of the text", "bin"], (
        [f"`{mark}`", "–", f"{tokens:,}", "–", "–"] if at is None else
        [f"`{mark}`", f"{at:,}", f"{tokens:,}", f"{at / tokens:.1%}", bisect.bisect_right(edges, at)]
        for mark, at in marks.items()), align="lrrrr"))


def stretch_names(rows: list[dict]) -> list[str]:
    """Every stretch any row has, in the order they first appear: the columns of the stretch tables."""
    return list(dict.fromkeys(name for r in rows for name in r["stretches"]))


def stretches_table(rows: list[dict]) -> str:
    """Each run's mean loss in each stretch of the text, beside how often it read its training split and its
    training loss: a run that memorises the seen text is low on it and high on the stretch it has not seen."""
    names = stretch_names(rows)
    head = ["run", "family", "passes over train", "train loss (last epoch)", *names]
    return "\n".join(table_lines(head, ([r["run"], r["family"], "–" if r["passes"] is None else f"{r['passes']:.1f}",
                                        "–" if r["train_loss"] is None else f"{r['train_loss']:.3f}",
                                        *["–" if name not in r["stretches"] else f"{r['stretches'][name]:.3f}"
                                          for name in names]] for r in rows)))


def table(rows: list[dict], bins: int) -> str:
    head = ["run", "family", "non-emb params", "valid", "test", "recorded test/loss",
            *[f"bin {i + 1}" for i in range(bins)]]
    return "\n".join(table_lines(head, ([r["run"], r["family"], f"{r['params_non_embedding']:,}", f"{r['valid']:.3f}",
                                        "–" if r["test"] is None else f"{r['test']:.3f}",
                                        "–" if r["recorded_test_loss"] is None else f"{r['recorded_test_loss']:.3f}",
                                        *[f"{b:.3f}" for b in r["bins"]]] for r in rows)))


def cells_of(rows: list[dict]) -> dict[tuple, list[dict]]:
    """The runs of each (family, budget, size), in the order given: a cell's runs differ by their seed alone."""
    cells: dict[tuple, list[dict]] = {}
    for r in rows:
        cells.setdefault((r["family"], r["budget"], r["params_non_embedding"]), []).append(r)
    return cells


def _mean(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def cell_rows(rows: list[dict]) -> list[dict]:
    """One row per (family, budget, size): its runs and seeds, and the mean over them of its passes over the
    training split, its score-half loss and its loss in each stretch, with the stretch's sd over the seeds where
    it has two runs or more and the count of runs it is over (a run made without a mark lacks its stretch). The one place the runs are averaged: the tables below and the record's `cells.csv`
    (which `seqbench.reports.findings.unseen_text` reads) are this."""
    names = stretch_names(rows)
    out = []
    for (family, budget, params), group in cells_of(rows).items():
        cell = {"family": family, "budget": budget, "params_non_embedding": params, "runs": len(group),
                "seeds": " ".join(str(r["seed"]) for r in group if r["seed"] is not None),
                "passes": _mean([r["passes"] for r in group]), "test": _mean([r["test"] for r in group])}
        for name in names:
            values = [r["stretches"][name] for r in group if r["stretches"].get(name) is not None]
            cell[name] = _mean(values)
            cell[f"sd: {name}"] = statistics.stdev(values) if len(values) >= 2 else None
            cell[f"n: {name}"] = len(values)  # the runs with this stretch: its mean's and sd's count
        out.append(cell)
    return out


def compute_changes(rows: list[dict]) -> str:
    """What the next budget did to each family at one size: the change of its mean loss over seeds
    (`cell_rows`), on the whole score half and in each stretch, from each budget to the next one the runs
    have. Lower on the stretch of a text the training split holds and higher on one it lacks is memorising,
    not learning."""
    names = stretch_names(rows)
    cells = {(c["family"], c["budget"], c["params_non_embedding"]): c for c in cell_rows(rows)}
    head = ["family", "non-emb params", "budget (FLOPs)", "runs", "test", *names]
    lines = []
    for family, params in dict.fromkeys((f, p) for f, _, p in cells):
        budgets = sorted(b for f, b, p in cells if (f, p) == (family, params) and b is not None)
        for low, high in zip(budgets, budgets[1:]):
            a, b = cells[(family, low, params)], cells[(family, high, params)]

            def change(column: str) -> str:
                return "–" if a[column] is None or b[column] is None else f"{b[column] - a[column]:+.3f}"

            lines.append([family, f"{params:,}", f"{low:.0e} → {high:.0e}", f"{a['runs']} → {b['runs']}", change("test"),
                          *[change(n) for n in names]])
    return "\n".join(table_lines(head, lines))


def by_cell(rows: list[dict]) -> str:
    """The mean over seeds of each (family, budget, size) (`cell_rows`): its passes over the training split
    and its loss in each stretch, so ten times the compute can be read family by family on the seen and the
    unseen text."""
    names = stretch_names(rows)
    head = ["family", "budget (FLOPs)", "non-emb params", "runs (seeds)", "passes over train", "test", *names]

    def mean(value: float | None, digits: int = 3) -> str:
        return "–" if value is None else f"{value:.{digits}f}"

    lines = []
    for c in cell_rows(rows):
        seeds = ", ".join(c["seeds"].split())
        lines.append([c["family"], "–" if c["budget"] is None else f"{c['budget']:.0e}", f"{c['params_non_embedding']:,}",
                      f"{c['runs']}" + (f" ({seeds})" if seeds else ""), mean(c["passes"], 1), mean(c["test"]),
                      *[mean(c[name]) for name in names]])
    return "\n".join(table_lines(head, lines))


def write_cells(path: Path, rows: list[dict]) -> None:
    """`cell_rows(rows)` as a CSV: the record's per-cell means and seed sds, for the readers of the record."""
    cells = cell_rows(rows)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(cells[0]) if cells else ["family"])
        w.writeheader()
        w.writerows({k: "" if v is None else v for k, v in c.items()} for c in cells)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", type=Path, nargs="+", help="run directories, sweep directories or .ckpt files")
    parser.add_argument("--out", type=Path, default=Path("outputs/loss_by_position"))
    parser.add_argument("--bins", type=int, default=10, help="contiguous parts of the evaluation text")
    parser.add_argument("--warm", type=int, default=2048, help="training tokens read before the evaluation text")
    parser.add_argument("--mark", nargs="*", default=[],
                        help="text whose first appearance in the evaluation text is located (e.g. a speaker's 'PROSPERO:')")
    args = parser.parse_args(argv)
    started = time.time()
    lms = load_all(args.paths)
    marks = {}  # per data module (runs of one corpus share one): the marks' positions in its text
    for lm in lms:
        if id(lm.datamodule) not in marks:
            marks[id(lm.datamodule)] = mark_positions(lm.datamodule, args.warm, args.mark)
    rows = [measure(lm, args.bins, args.warm, marks[id(lm.datamodule)][0]) for lm in lms]
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "loss_by_position.csv", "w", newline="") as f:
        w = csv.writer(f)
        names = stretch_names(rows)
        w.writerow(["run", "family", "corpus", "budget", "seed", "params_non_embedding", "tokens", "passes",
                    "train_loss", "valid",
                    "test", "recorded_test_loss", *[f"bin_{i + 1}" for i in range(args.bins)], *names])
        for r in rows:
            w.writerow([r["run"], r["family"], r["corpus"], r["budget"], r["seed"], r["params_non_embedding"],
                        r["tokens"], r["passes"],
                        r["train_loss"], r["valid"], r["test"], r["recorded_test_loss"], *r["bins"],
                        *[r["stretches"].get(name) for name in names]])
    text = (f"# Loss along the evaluation text\n\nMean loss (nats per token) of every token of valid, then test, "
            f"read with everything before it (the last {args.warm:,} training tokens first), in {args.bins} "
            f"contiguous bins in the order of the text.\n\n{table(rows, args.bins)}\n")
    if args.mark:
        text += (f"\n## Where the text changes\n\nThe first appearance of each mark in the evaluation text "
                 f"({lms[0].corpus}).\n\n{marks_table(*marks[id(lms[0].datamodule)], args.bins)}\n"
                 f"\n## The loss in each stretch of the text\n\nMean loss (nats per token) between the cuts (the "
                 f"start of test and each mark's first appearance), each stretch named by its split and the last mark "
                 f"before it; beside it, how many times the run read its training split (`curve/tokens` over "
                 f"its tokens) and its last epoch's training loss.\n\n{stretches_table(rows)}\n"
                 f"\n## Each family and budget, over its seeds\n\nThe stretches above, the mean over the runs of "
                 f"each family, budget (`budget/flops`) and size, in the order the runs were given.\n\n"
                 f"{by_cell(rows)}\n"
                 f"\n## What the next budget did, family by family\n\nThe change of each family's mean loss "
                 f"(the table above) from each budget to the next, at one size: negative is lower.\n\n"
                 f"{compute_changes(rows)}\n")
    (args.out / "loss_by_position.md").write_text(text)
    write_cells(args.out / "cells.csv", rows)

    write_record(args.out, ["loss_by_position.csv", "cells.csv", "loss_by_position.md"],
                 "python -m seqbench.analysis.loss_by_position " + " ".join(sys.argv[1:] if argv is None else argv),
                 started)
    print(text)
    return rows


if __name__ == "__main__":
    main()
