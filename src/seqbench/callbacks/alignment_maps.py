"""Alignment heatmaps at the end of training, saved as PNG and logged to W&B (translation only).

Draws `alignment_figures` (below; `python -m seqbench.analysis.alignments` draws them from a saved run) for a
few fixed validation sentences into
`<run>/alignments/`; with a W&B logger each picture is also logged as an image (`alignments/<index>`).
A model without attention (Sutskever's seq2seq) or a task other than translation draws nothing.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch

from seqbench.data.translation import collate
from seqbench.nn.decoding import greedy, max_steps


class AlignmentMaps(L.Callback):
    def __init__(self, indices: list[int] | None = None) -> None:
        self.indices = list(indices) if indices is not None else [0, 1, 2, 3]

    def on_fit_end(self, trainer, pl_module) -> None:
        if not trainer.is_global_zero or pl_module.spec.task != "translation" or trainer.datamodule is None:
            return
        if not callable(getattr(pl_module, "alignments", None)):
            return
        try:
            paths = alignment_figures(pl_module, trainer.datamodule, self.indices,
                                      Path(trainer.default_root_dir) / "alignments")
        except ValueError:  # no attention, no alignment
            return
        for logger in trainer.loggers:
            if type(logger).__name__ == "WandbLogger":
                logger.log_image("alignments", [str(p) for p in paths], caption=[p.stem for p in paths])


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
