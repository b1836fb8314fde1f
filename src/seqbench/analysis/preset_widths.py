"""The widths that give every family the LSTM's size at each row of a frontier preset folder's `sizes` table:

    python -m seqbench.analysis.preset_widths frontier/enwik8 --vocab 256

The LSTM's rows set the targets: its parameters without embeddings (`num_params(non_embedding=True)`, what
the frontier compares and every run logs as `params_non_embedding`) at each size. Every other family keeps
the depth its table gives a size (layers and heads, blocks) and takes the width whose count is nearest the
target, found by building the model: counting by formula would be a second account of each architecture
that could drift from the code. Attention widths are multiples of the heads. Prints, per family, the
`sizes` rows and the comment lines with the counts, to paste into the preset files; a test checks each
file's widths against this (tests/test_enwik8_presets.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import hydra
import torch
from omegaconf import DictConfig, open_dict

from seqbench.compose import compose_final
from seqbench.data.spec import TaskSpec
from seqbench.families import compared

REFERENCE = "lstm"  # the family whose counts the others meet


def nearest_width(count: Callable[[int], int], target: int, step: int = 1) -> int:
    """The multiple of `step` whose `count` (increasing in the width) is nearest `target`; the smaller of two
    equally near. Doubles up to the first width at or above the target, then bisects between the multiples."""
    lo, hi = 0, step  # invariant once found: count(lo) < target <= count(hi), lo = 0 meaning "none below"
    while count(hi) < target:
        lo, hi = hi, hi * 2
    while hi - lo > step:
        mid = (lo + hi) // (2 * step) * step
        lo, hi = (mid, hi) if count(mid) < target else (lo, mid)
    if lo == 0:
        return hi
    return lo if target - count(lo) <= count(hi) - target else hi


class PresetCounter:
    """Counts of one frontier preset's model at any size and width, from one composition of its config
    (`cfg`, as `src/train.py` composes `preset=<folder>/<family>`; `PresetCounter.of` composes it)."""

    def __init__(self, cfg: DictConfig, vocab: int) -> None:
        self.cfg, self.spec = cfg, TaskSpec("lm", vocab_size=vocab)
        self._seen: dict[tuple[str, int | None], int] = {}

    @classmethod
    def of(cls, preset: str, vocab: int) -> "PresetCounter":
        return cls(compose_final([f"preset={preset}", "logger=csv"]), vocab)

    @property
    def sizes(self) -> dict[str, dict]:
        return {name: dict(row) for name, row in self.cfg.sizes.items()}

    def width_key(self, size: str) -> str:
        row = self.sizes[size]
        return "hidden" if "hidden" in row else "width"

    def step(self, size: str) -> int:
        return int(self.sizes[size].get("heads", 1))

    def count(self, size: str, width: int | None = None) -> int:
        """Parameters without embeddings at `size`, with its width replaced by `width` where given."""
        if (size, width) not in self._seen:
            cfg = self.cfg.copy()
            with open_dict(cfg):
                cfg.size = size
                if width is not None:
                    cfg.sizes[size][self.width_key(size)] = width
            with torch.device("meta"):  # shapes only: no memory, no initialisation (the 3M-parameter sizes)
                model = hydra.utils.instantiate(cfg.model, spec=self.spec)
            self._seen[(size, width)] = model.num_params(non_embedding=True)
        return self._seen[(size, width)]

    def solve(self, size: str, target: int) -> int:
        return nearest_width(lambda w: self.count(size, w), target, self.step(size))


def solve_folder(folder: str, vocab: int, families: list[str]) -> dict[str, tuple[PresetCounter, dict[str, tuple[int, int]]]]:
    """{family: (its counter, {size: (width, count)})}: the reference's own widths, and every other family's
    nearest width."""
    reference = PresetCounter.of(f"{folder}/{REFERENCE}", vocab)
    targets = {size: reference.count(size) for size in reference.sizes}
    out = {REFERENCE: (reference, {size: (int(row["hidden"]), targets[size]) for size, row in reference.sizes.items()})}
    for family in families:
        if family == REFERENCE:
            continue
        counter = PresetCounter.of(f"{folder}/{family}", vocab)
        widths = {size: counter.solve(size, targets[size]) for size in targets}
        out[family] = (counter, {size: (w, counter.count(size, w)) for size, w in widths.items()})
    return out


def describe(family: str, counter_sizes: dict[str, dict], solved: dict[str, tuple[int, int]], key: str) -> list[str]:
    """The preset's `sizes` rows and its comment lines, as they are pasted."""
    rows, comments = [], []
    for size, (width, count) in solved.items():
        row = {**counter_sizes[size], key: width}
        rows.append(f"  {size}: {{" + ", ".join(f"{k}: {v}" for k, v in row.items()) + "}")
        depth = f"{row['layers']} layers x {row['heads']} heads x " if "heads" in row else ""
        unit = "units" if key == "hidden" else "width"
        comments.append(f"#   {size}: {depth}{width} {unit}".ljust(40) + f"{count:>10,}")
    return [f"== {family}", *comments, "sizes:", *rows]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m seqbench.analysis.preset_widths", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="the frontier preset folder, e.g. frontier/enwik8")
    parser.add_argument("--vocab", type=int, default=256, help="the corpus' vocabulary (enwik8: 256 bytes)")
    parser.add_argument("--families", default=",".join(compared()), help="comma-separated (default: the compared)")
    args = parser.parse_args(argv)
    for family, (counter, sizes) in solve_folder(args.folder, args.vocab, args.families.split(",")).items():
        print("\n".join(describe(family, counter.sizes, sizes, counter.width_key(next(iter(sizes))))))


if __name__ == "__main__":
    main()
