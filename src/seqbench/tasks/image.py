"""Image classification: the classification task for families that read images.

Batches carry `image` (B, C, H, W) and `label` (B,); an image DataModule asked for a sequence form
(`as_sequence=rows|pixels|permuted_pixels`) adds `input` (B, T, F) and `lengths`, which is what a
recurrent reader consumes. A family supports the task by implementing `classify_image(batch)`.
Loss and accuracy are the classification task's.
"""

from __future__ import annotations

from seqbench.tasks.classification import Classification


class ImageClassification(Classification):
    name = "image"
    method = "classify_image"

    def example(self, model, batch: dict, i: int):
        """The image itself (C, H, W), scaled to [0, 1]; the samples callback shows it as a picture."""
        image = batch["image"][i].detach().float().cpu()
        return (image - image.min()) / (image.max() - image.min()).clamp_min(1e-8)
