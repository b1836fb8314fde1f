"""Loss by position inside a window: how many tokens each family needs before its loss settles, and
whether an attention model's sliding-window evaluation scores the positions it predicts best.

    python -m seqbench.analysis.window_position <run dirs, sweep dirs or .ckpt files> [--out DIR]
        [--split test] [--windows 2000] [--seed 0] [--length L]

The same N windows of the split for every model of a corpus, drawn with context_usage's seeded
sampler: window n is stream[e_n - L : e_n] with the targets one token later, L the longest trained
context of the corpus's attention models (`--length` where there is none). For every model, the mean
next-token loss (and its standard error over the windows) at each position i = 0 .. L-1, i.e. with
i + 1 tokens read:

* an attention model reads the first `context` tokens of each window in one forward pass, as in
  training (a training tile is exactly such a window: every position is trained equally often);
* a recurrent, parallel-recurrent or SSM model reads the whole window from a zero state.

    stream  ... | w0 w1 w2 ... w(L-1) | w(L) ...     inputs w0 .. w(L-1), targets w1 .. w(L)
    position       0  1  2  ...  L-1                 (position i has read i + 1 tokens)

Why: in `experiments/context-usage.md` the Shakespeare Transformer (context 64) scored 1.639 nats
with 50 characters and 1.669 with its full window. The sliding-window evaluation scores positions
context - stride .. context - 1 (`data.eval_stride`, default half the context; `seqbench.data.windows`),
the last half of a window, and context_usage's "k = 50" is position 49 of a 50-token window against
its full read, position 63 of a 64-token one: the anomaly is a statement about loss by position. If
the loss rises over a window's last positions (each position is trained equally often, but position i
only ever with i tokens before it, at one place of the position table), that evaluation scores the
model's worst positions. Reported per attention model: the mean loss over the scored positions, the
best band of positions (a sixteenth of the window), and their difference. The band is chosen on the
even windows and the difference measured on the odd ones (paired standard error), so the minimum of
many noisy means does not flatter it.

Writes `window_position.csv` (every position of every model), `window_<corpus>.png` (loss against
position, family colours; the scored positions shaded) and `window_position.md` (the table), and the
folder's ledger record.

Issue 36, item 6 asks for attention models trained with 256-token windows on both corpora. A window is
the attention model's `model.context` (the data module cuts training tiles and evaluation windows of
that length, and the FLOPs budget counts the attention term at that length: seqbench.training.budget), so one
override does it (written `++model.context`: a multirun first composes its config without the swept
presets, where the default model has no `context` to set). The frontier's attention presets at 256
tokens, then both analyses:

    python src/train.py -m experiment=frontier \\
        preset=frontier/shakespeare/transformer,frontier/shakespeare/gpt ++model.context=256
    python src/train.py -m experiment=frontier_ptb \\
        preset=frontier/ptb/transformer,frontier/ptb/gpt ++model.context=256
    python -m seqbench.analysis.window_position outputs/multiruns/<shakespeare sweep> \\
        outputs/multiruns/<ptb sweep> --out experiments/figures/window-position
    python -m seqbench.analysis.context_usage outputs/multiruns/<shakespeare sweep> \\
        outputs/multiruns/<ptb sweep> --out experiments/figures/context-256

Each sweep is the experiment's 3 sizes x 3 budgets per preset; `size=l budget.flops=1e13` narrows it
to the cell experiments/context-usage.md measured. `model=transformer data=shakespeare_char` (or `model=gpt`) alone already trains 256-token windows, the
families' default `model.context`; the presets set 64 (Shakespeare) and 128 (PTB). The override keeps a
preset's windows per step, so a step holds 4x (Shakespeare, 12 x 256) and 2x (PTB, 16 x 256) the tokens
and a budget buys fewer steps; `data.batch_size=3` (Shakespeare) or `=8` (PTB) keeps the preset's tokens
per step instead (tokens per step is one of the tuned settings: experiment=tune_frontier).
tests/test_compute_budget.py checks that one override gives these presets 256-token windows and that
the budget and FlopCounterMode count the same FLOPs per token at 256.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from seqbench.analysis.context_usage import (
    LM,
    WITHIN,
    group_by_corpus,
    load_all,
    paired,
    sample_targets,
    windows,
)
from seqbench.entry import run_command
from seqbench.errors import UserError
from seqbench.families import colour
from seqbench.provenance import command_line, write_record
from seqbench.tables import table_lines

LENGTH = 256  # a corpus without attention models: the window issue 36 trains attention models at
BANDS = 16  # the best positions are a band of a sixteenth of the window (16 positions of 256)


# -- the measurement (pure torch on a model with window_logits; tested) -----------------------------
def window_rows(stream: torch.Tensor, ends: torch.Tensor, length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets), each (N, length): window n is stream[e_n - length : e_n], its targets one later."""
    return windows(stream, ends, length), windows(stream, ends + 1, length)


@torch.inference_mode()
def position_losses(model, inputs: torch.Tensor, targets: torch.Tensor, batch_tokens: int = 16384) -> torch.Tensor:
    """(N, L) loss of every position of every window, in nats; each window read alone (`window_logits`:
    attention in one pass, a recurrent model from a zero state), batch_tokens // L windows at a time."""
    out = []
    step = max(1, batch_tokens // inputs.size(1))
    for i in range(0, inputs.size(0), step):
        logits = model.window_logits(inputs[i : i + step].to(model.device))  # (B, L, V)
        out.append(torch.nn.functional.cross_entropy(logits.float().transpose(1, 2), targets[i : i + step].to(
            logits.device), reduction="none").cpu())  # (B, L)
    return torch.cat(out)


def settles_at(curve: torch.Tensor, within: float = WITHIN) -> int:
    """The first position whose mean loss is within `within` (relative) of the plateau, the mean over
    the window's last quarter: how many tokens (plus one) a model needs before its loss settles."""
    plateau = curve[-max(1, len(curve) // 4):].mean()
    return int(torch.nonzero(curve <= plateau * (1 + within))[0])


def scored_positions(context: int, stride: int) -> range:
    """The positions of a window the sliding evaluation scores (all but the split's first window)."""
    return range(context - stride, context)


def eval_against_best(losses: torch.Tensor, scored: range, band: int = 1) -> dict:
    """The scored positions' mean against the best band of `band` consecutive positions: chosen on the
    even windows, the paired difference measured on the odd ones (choosing the minimum of many noisy
    means on the same windows would flatter it; a band of a few positions averages their noise)."""
    means = losses[0::2].mean(0).unfold(0, band, 1).mean(1)  # (L - band + 1,) mean of each band
    best = int(means.argmin())
    held = losses[1::2]
    at_best = held[:, best : best + band].mean(1)
    gap, se = paired(held[:, scored.start : scored.stop].mean(1), at_best)
    return {"best_position": best, "band": band, "best_loss": at_best.mean().item(),
            "scored_loss": held[:, scored.start : scored.stop].mean().item(), "gap": gap, "gap_se": se}


# -- one model ------------------------------------------------------------------------------------
@dataclass
class Curve:
    lm: LM
    length: int         # positions measured: the attention model's context, else the corpus's window
    loss: torch.Tensor  # (length,) mean over the windows
    se: torch.Tensor    # (length,) standard error of each mean
    summary: dict


def stride_of(lm: LM) -> int:
    """The data module's evaluation stride for this model (null: half the context, as `seqbench.data.lm`)."""
    return lm.datamodule.eval_stride or max(1, lm.context // 2)


def measure(lm: LM, inputs: torch.Tensor, targets: torch.Tensor, batch_tokens: int) -> Curve:
    """The loss curve of one model on the corpus's windows (an attention model: their first `context`)."""
    length = lm.context or inputs.size(1)
    losses = position_losses(lm.model.eval(), inputs[:, :length], targets[:, :length], batch_tokens)  # (N, length)
    loss, se = losses.mean(0), losses.std(0) / math.sqrt(losses.size(0))
    summary = {"windows": losses.size(0), "first": loss[0].item(), "mean": loss.mean().item(),
               "last": loss[-1].item(), "settles_at": settles_at(loss)}
    if lm.context is not None:
        stride = stride_of(lm)
        band = max(1, length // BANDS)
        summary |= {"stride": stride, **eval_against_best(losses, scored_positions(lm.context, stride), band)}
    return Curve(lm, length, loss, se, summary)


def corpus_windows(group: list[LM], split: str, n: int, seed: int, length: int | None) -> tuple[torch.Tensor, int]:
    """The window ends shared by every model of one corpus, and the window length: the longest attention
    context of the group (`length` where the group has none)."""
    sizes = {lm.datamodule.streams[split].numel() for lm in group}
    if len(sizes) > 1:
        raise UserError(f"the {group[0].corpus} runs tokenise the {split} split differently ({sorted(sizes)} tokens); "
                        f"give runs that share a vocabulary, or one run at a time.")
    contexts = [lm.context for lm in group if lm.context is not None]
    length = max(contexts) if contexts else (length or LENGTH)
    tokens = sizes.pop()
    if tokens <= length:
        raise UserError(f"the {split} split holds {tokens} tokens, too few for windows of {length}; give a shorter "
                        "--length (corpora without attention models) or a longer split.")
    # ends e with e - length >= 0 and a target at e: sample_targets' positions p in [length, tokens)
    return sample_targets(tokens, n, need=length, seed=seed), length


def measure_corpus(group: list[LM], split: str, n: int, seed: int, length: int | None,
                   batch_tokens: int = 16384) -> list[Curve]:
    """Every model of one corpus on the same seeded windows of `split`."""
    ends, length = corpus_windows(group, split, n, seed, length)
    inputs, targets = window_rows(group[0].datamodule.streams[split], ends, length)
    curves = []
    for lm in group:
        curves.append(measure(lm, inputs, targets, batch_tokens))
        s = curves[-1].summary
        print(f"{lm.corpus} {lm.family} {lm.name}: position 0 {s['first']:.3f}, mean {s['mean']:.3f}, last "
              f"{s['last']:.3f}, settles at {s['settles_at']}", file=sys.stderr)
    return curves


# -- outputs --------------------------------------------------------------------------------------
def label(curve: Curve, curves: list[Curve]) -> str:
    name = curve.lm.family
    return name if sum(c.lm.family == name for c in curves) == 1 else f"{name} ({curve.lm.name})"


def write_csv(curves: list[Curve], path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["corpus", "family", "run", "position", "loss", "se", "windows", "scored"])
        for c in curves:
            scored = scored_positions(c.lm.context, c.summary["stride"]) if c.lm.context else range(0)
            for i in range(c.length):
                w.writerow([c.lm.corpus, c.lm.family, c.lm.name, i, f"{c.loss[i]:.5f}", f"{c.se[i]:.5f}",
                            c.summary["windows"], int(i in scored)])


def plot_corpus(corpus: str, curves: list[Curve], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (whole, plateau) = plt.subplots(1, 2, figsize=(12, 4.5))
    styles = ("-", "--", ":", "-.")  # runs of one family share its colour: told apart by the line
    for k, c in enumerate(curves):
        x = torch.arange(c.length)
        style = styles[sum(o.lm.family == c.lm.family for o in curves[:k]) % len(styles)]
        line, = whole.plot(x + 1, c.loss, style, color=colour(c.lm.family), label=label(c, curves), lw=1.2)
        plateau.plot(x, c.loss, style, color=line.get_color(), lw=1)
        plateau.fill_between(x, c.loss - c.se, c.loss + c.se, color=line.get_color(), alpha=0.2, lw=0)
        if c.lm.context:
            scored = scored_positions(c.lm.context, c.summary["stride"])
            plateau.axvspan(scored.start - 0.5, scored.stop - 0.5, color=line.get_color(), alpha=0.06)
            best = slice(c.summary["best_position"], c.summary["best_position"] + c.summary["band"])
            plateau.plot(x[best], c.loss[best], lw=3, color=line.get_color(), alpha=0.6)
    whole.set_xscale("log")
    whole.set_xlabel("tokens read (position i + 1)")
    whole.set_ylabel("mean loss (nats per token)")
    whole.set_title(f"{corpus}: loss by position in the window", fontsize=10)
    tail = torch.cat([c.loss[c.length // 8:] for c in curves])
    plateau.set_ylim(tail.min().item() - 0.02, tail.max().item() + 0.02)
    plateau.set_xlabel("position i in the window")
    plateau.set_title("zoom (band: ± s.e.; shaded: positions the sliding evaluation scores; thick: best band)", fontsize=9)
    for ax in (whole, plateau):
        ax.grid(alpha=0.3, which="both")
    whole.legend(fontsize=7)
    fig.suptitle(f"{curves[0].summary['windows']} windows, the same for every model", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(curves: list[Curve], split: str) -> str:
    lines = [f"Loss by position in the window, {split} split; nats per token, mean over the same windows for every "
             "model of a corpus.", ""]
    rows = []
    for c in curves:
        s = c.summary
        row = [c.lm.corpus, c.lm.family, c.lm.name, c.length, s["windows"], f"{s['first']:.3f}", s["settles_at"],
               f"{s['mean']:.3f}", f"{s['last']:.3f}"]
        if c.lm.context:
            scored = scored_positions(c.lm.context, s["stride"])
            best = f"{s['best_position']}–{s['best_position'] + s['band'] - 1}" if s["band"] > 1 else s["best_position"]
            row += [f"{scored.start}–{scored.stop - 1}", f"{s['scored_loss']:.3f}", best, f"{s['best_loss']:.3f}",
                    f"{s['gap']:+.3f} ± {s['gap_se']:.3f}"]
        else:
            row += ["– (state carried)", "–", "–", "–", "–"]
        rows.append(row)
    lines += table_lines(["corpus", "family", "run", "window", "windows", "loss at position 0", "settles at position",
                          "mean over the window", "last position", "evaluation scores", "their loss", "best positions",
                          "their loss", "scored − best"], rows, align="lllrrrrrrlrrrr")
    lines += ["", "Attention models read the first `context` tokens of each window in one pass, as in training; "
              "recurrent models read the window from a zero state. 'Settles at': the first position within 1 % of "
              "the mean over the window's last quarter. 'Evaluation scores': the positions the sliding-window "
              "evaluation scores (context − stride .. context − 1). Best positions: the band of a sixteenth of the "
              "window with the lowest mean loss on the even windows; its loss, the scored positions' loss and their "
              "paired difference (± s.e.) on the odd ones."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", type=Path, nargs="+", help="run directories, sweep directories or .ckpt files")
    parser.add_argument("--out", type=Path, default=Path("outputs/window_position"))
    parser.add_argument("--split", choices=("valid", "test"), default="test")
    parser.add_argument("--windows", type=int, default=2000, help="sampled windows per corpus")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--length", type=int, default=None,
                        help=f"window for a corpus without attention models (default {LENGTH})")
    parser.add_argument("--batch-tokens", type=int, default=16384, help="tokens per forward pass")
    args = parser.parse_args(argv)
    if args.windows < 2 or args.batch_tokens < 1 or (args.length is not None and args.length < 1):
        raise UserError("--windows must be at least 2 (the best position is chosen on half of them), "
                        "--batch-tokens and --length positive.")

    started = time.time()
    by_corpus = group_by_corpus(load_all(args.paths))
    args.out.mkdir(parents=True, exist_ok=True)
    curves = []
    for corpus, group in by_corpus.items():
        curves += measure_corpus(group, args.split, args.windows, args.seed, args.length, args.batch_tokens)
        plot_corpus(corpus, curves[-len(group):], args.out / f"window_{corpus}.png")
    write_csv(curves, args.out / "window_position.csv")
    (args.out / "window_position.md").write_text(table(curves, args.split))
    write_record(args.out, ["window_position.csv", "window_position.md"],
                 command_line("seqbench.analysis.window_position", argv), started)  # the ledger
    print(args.out / "window_position.md")
    return {c.lm.name: c for c in curves}


if __name__ == "__main__":
    run_command(main, sys.argv[1:])
