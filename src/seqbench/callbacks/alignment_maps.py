"""Alignment heatmaps at the end of training, saved as PNG and logged to W&B (translation only).

Draws `seqbench.analysis.alignments.alignment_figures` for a few fixed validation sentences into
`<run>/alignments/`; with a W&B logger each picture is also logged as an image (`alignments/<index>`).
A model without attention (Sutskever's seq2seq) or a task other than translation draws nothing.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L


class AlignmentMaps(L.Callback):
    def __init__(self, indices: list[int] | None = None) -> None:
        self.indices = list(indices) if indices is not None else [0, 1, 2, 3]

    def on_fit_end(self, trainer, pl_module) -> None:
        if not trainer.is_global_zero or pl_module.spec.task != "translation" or trainer.datamodule is None:
            return
        if not callable(getattr(pl_module, "alignments", None)):
            return
        try:
            from seqbench.analysis.alignments import alignment_figures

            paths = alignment_figures(pl_module, trainer.datamodule, self.indices,
                                      Path(trainer.default_root_dir) / "alignments")
        except ValueError:  # no attention, no alignment
            return
        for logger in trainer.loggers:
            if type(logger).__name__ == "WandbLogger":
                logger.log_image("alignments", [str(p) for p in paths], caption=[p.stem for p in paths])
