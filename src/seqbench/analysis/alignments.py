"""Alignment pictures: source x target heatmaps of where a translation model attends.

For a few fixed validation sentences the model translates greedily, then re-reads its own
translation under teacher forcing so that every attention weight belongs to an emitted word — the
picture of Bahdanau et al. (2015), Figure 3. A recurrent decoder has one map per sentence; a
Transformer has one per decoder layer and head (cross-attention), drawn as a layers x heads grid.

    python -m seqbench.analysis.alignments outputs/runs/<run> [--indices 0 1 2 3] [--out DIR]

reads the run's config and best checkpoint and writes `alignment_<index>.png` (default: into
`<run>/alignments/`). During training the `AlignmentMaps` callback draws the same pictures at the
end of fit and logs them to W&B.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from seqbench.checkpoints import check_checkpoint, load_weights
from seqbench.data.translation import collate
from seqbench.entry import register_resolvers, run_command
from seqbench.errors import UserError
from seqbench.nn.decoding import greedy, max_steps


def _piece(tok, i: int) -> str:
    return tok.id_to_token(i).replace("▁", "_")


@torch.no_grad()
def alignment_figures(model, datamodule, indices: list[int], out_dir: Path, split: str = "valid") -> list[Path]:
    """Draw one PNG per sentence; returns their paths (nothing for a model without `alignments`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not callable(getattr(model, "alignments", None)) or model.spec.task != "translation":
        return []
    spec, src_tok = model.spec, datamodule.src_tok
    pairs = [datamodule.pairs[split][i] for i in indices if i < len(datamodule.pairs[split])]
    if not pairs:
        return []
    was_training = model.training
    model.eval()
    batch = {k: v.to(model.device) for k, v in collate(pairs, spec.pad_id, spec.bos_id, spec.eos_id).items()}
    out = greedy(model, batch, spec.bos_id, spec.eos_id, spec.pad_id, max_steps(batch, 1.5, 10))  # (B, T)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for b, (index, src_ids, _) in enumerate(pairs):
        hyp = out[b].tolist()
        hyp = hyp[: hyp.index(spec.eos_id) + 1] if spec.eos_id in hyp else hyp
        one = collate([(index, src_ids, hyp[:-1] if hyp and hyp[-1] == spec.eos_id else hyp)], spec.pad_id,
                      spec.bos_id, spec.eos_id)
        one = {k: v.to(model.device) for k, v in one.items()}
        maps = model.alignments(one)[0].float().cpu()  # (heads, T, S)
        prefix = getattr(model, "prefix_ids", None)  # T5 reads a task prefix before the source
        prefix = prefix.tolist() if prefix is not None else []
        src_labels = [_piece(src_tok, i) for i in prefix + list(src_ids)] + ["<eos>"]
        tgt_labels = [_piece(spec.tokenizer, i) for i in hyp[:-1]] + ["<eos>"]
        maps = maps[:, : len(tgt_labels), : len(src_labels)]
        layers = getattr(getattr(getattr(model, "net", None), "decoder", None), "blocks", None)
        rows = len(layers) if layers is not None and maps.size(0) % len(layers) == 0 else 1
        cols = maps.size(0) // rows
        n = max(len(src_labels), len(tgt_labels))
        size = 0.16 * n + 0.8 if maps.size(0) > 1 else max(4.0, 0.25 * n + 1.2)  # inches per panel
        fig, axes = plt.subplots(rows, cols, figsize=(size * cols, size * rows), squeeze=False)
        for h in range(maps.size(0)):
            ax = axes[h // cols][h % cols]
            ax.imshow(maps[h].numpy(), cmap="gray_r", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(range(len(src_labels)), src_labels, rotation=90, fontsize=6)
            ax.set_yticks(range(len(tgt_labels)), tgt_labels, fontsize=6)
            if maps.size(0) > 1:
                ax.set_title(f"layer {h // cols + 1} head {h % cols + 1}", fontsize=7)
        fig.suptitle(f"{split} sentence {index}:\n{spec.tokenizer.decode(hyp)}", fontsize=8)
        fig.tight_layout()
        path = out_dir / f"alignment_{index}.png"
        fig.savefig(path, dpi=100 if maps.size(0) == 1 else 72)
        plt.close(fig)
        paths.append(path)
    model.train(was_training)
    return paths


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
