"""Alignment pictures: source x target heatmaps of where a translation model attends.

For a few fixed validation sentences the model translates greedily, then re-reads its own
translation under teacher forcing so that every attention weight belongs to an emitted word — the
picture of Bahdanau et al. (2015), Figure 3. A recurrent decoder has one map per sentence; a
Transformer has one per decoder layer and head (cross-attention), drawn as a layers x heads grid.

    python -m seqbench.analysis.alignments outputs/runs/<run> [--indices 0 1 2 3] [--out DIR]

reads the run's config and best checkpoint and writes `alignment_<index>.png` (default: into
`<run>/alignments/`). During training the `AlignmentMaps` callback draws the same pictures at the
end of fit and logs them to W&B (`seqbench.callbacks.alignment_maps.alignment_figures` draws both).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from seqbench.callbacks.alignment_maps import alignment_figures
from seqbench.checkpoints import check_checkpoint, load_weights
from seqbench.entry import register_resolvers, run_command
from seqbench.errors import UserError


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run directory (holds .hydra/config.yaml and checkpoints/)")
    parser.add_argument("--indices", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--ckpt", type=Path, default=None, help="default: the best-*.ckpt of the run")
    args = parser.parse_args(argv)

    import hydra
    from omegaconf import OmegaConf

    register_resolvers()
    best = sorted((args.run / "checkpoints").glob("best-*.ckpt"))
    if args.ckpt is None and not best:
        raise UserError(f"{args.run / 'checkpoints'} holds no best-*.ckpt; give a run directory of a finished "
                        f"translation run, or the checkpoint with --ckpt.")
    ckpt = args.ckpt or best[-1]
    what = f"--ckpt {ckpt}" if args.ckpt else None
    check_checkpoint(ckpt, what)  # before the data is read: a file that would run code is refused first
    cfg = OmegaConf.load(args.run / ".hydra" / "config.yaml")
    # only the data and model nodes: the rest refers to ${hydra:...}, which exists only inside a Hydra job
    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.setup("fit")
    model = hydra.utils.instantiate(cfg.model, spec=datamodule.spec)
    load_weights(model, ckpt, what)
    for path in alignment_figures(model, datamodule, args.indices, args.out or args.run / "alignments"):
        print(path)


if __name__ == "__main__":
    run_command(main, sys.argv[1:])
