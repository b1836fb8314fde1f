"""Which answers of copy memory a trained model gets right, and whether it read them from the symbols.

    python -m seqbench.analysis.copy_positions outputs/multiruns/<time> --T 500 --families rnn lstm gru

For each finished `experiment=long_range` job at gap T: the validation accuracy at each of the
`copy_length` answer positions, once on the real inputs and once with the symbols replaced by fresh
random ones (tags unchanged). A model that learned nothing about the symbols scores 1/K either way;
accuracy above 1/K that falls to 1/K when the symbols are scrambled was read from the symbols across
the gap — the control that an above-baseline score is memory, not a quirk of the data.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from seqbench.analysis.gradient_flow import build_family, trained_checkpoints
from seqbench.checkpoints import load_weights
from seqbench.data.streams import IGNORE_INDEX
from seqbench.entry import run_command
from seqbench.families import compared
from seqbench.tables import table_lines, table_row


@torch.no_grad()
def answer_accuracy(model, batch: dict, num_symbols: int, copy_length: int, seed: int = 7) -> dict[str, torch.Tensor]:
    """{"real": (copy_length,), "scrambled": (copy_length,)} accuracy per answer position."""
    model.eval()
    tags = batch["tags"][:, -copy_length:]  # (B, c)
    if (tags == IGNORE_INDEX).any():
        raise ValueError("the last copy_length positions of a copy-memory batch must be its scored answers")
    scrambled = batch["input"].clone()
    scrambled[:, :copy_length] = torch.randint(1, num_symbols + 1, (scrambled.size(0), copy_length),
                                               generator=torch.Generator().manual_seed(seed))
    out = {}
    for name, x in (("real", batch["input"]), ("scrambled", scrambled)):
        pred = model.tag({"input": x})[:, -copy_length:].argmax(-1)  # (B, c)
        out[name] = (pred == tags).float().mean(0)
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m seqbench.analysis.copy_positions",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="long_range multirun directories")
    parser.add_argument("--T", type=int, required=True)
    parser.add_argument("--families", nargs="+", default=compared(), choices=compared())
    args = parser.parse_args(argv)
    checkpoints = trained_checkpoints(args.runs, args.T)
    results = {}
    print("\n".join(table_lines(["family", "inputs", "accuracy", "per answer position (1st .. last)"], align="llrl")))
    for family in args.families:
        if family not in checkpoints:
            print(f"no finished {family} job at T={args.T} under {args.runs}; skipped", file=sys.stderr)
            continue
        datamodule, model = build_family(family, args.T)
        load_weights(model, checkpoints[family])
        acc = answer_accuracy(model, datamodule.fixed["val"], datamodule.num_symbols, datamodule.copy_length)
        results[family] = acc
        for name, per in acc.items():
            print(table_row([family, name, f"{per.mean():.4f}", " ".join(f"{v:.2f}" for v in per.tolist())]))
    return results


if __name__ == "__main__":
    run_command(main, sys.argv[1:])
