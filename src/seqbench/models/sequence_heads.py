"""What the recurrent encoders share on the sequence tasks: the recurrent family and the parallel recurrences.

A family mixes in `SequenceHeads` when on classification, regression, tagging and images (an image
read as a sequence of rows or pixels, `data.as_sequence`) its `self.encoder` reads the sequence
(`encoder(x, lengths) -> (states (B, T, D), ...)`, `encoder.summary(x, lengths, pooling) -> (B, D)`)
and one linear `self.head` reads its summary (classification, regression) or every state (tagging).
A family may change what the encoder reads (`encoder_input`: the recurrent family adds character
features) and what comes between the encoder and the head (`head_dropout`).
"""

from __future__ import annotations

import torch

from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError


IMAGES_AS_SEQUENCES = ("a recurrent encoder reads images as sequences: set data.as_sequence=rows, pixels or "
                       "permuted_pixels.")


def require_sequence_images(spec: TaskSpec) -> None:
    """An image task must serve its images as sequences for a recurrent encoder to read them."""
    if spec.task == "image" and spec.input_dim is None:
        raise ConfigError(IMAGES_AS_SEQUENCES)


class SequenceHeads:
    def encoder_input(self, batch: dict) -> torch.Tensor:
        """What the encoder reads: the batch's token ids (B, T) or feature vectors (B, T, F)."""
        return batch["input"]

    def head_dropout(self, states: torch.Tensor) -> torch.Tensor:
        """Between the encoder and the head: nothing unless the family says otherwise."""
        return states

    def classify(self, batch: dict) -> torch.Tensor:
        summary = self.encoder.summary(self.encoder_input(batch), batch.get("lengths"), self.pooling)  # (B, D)
        return self.head(self.head_dropout(summary))  # (B, C)

    def classify_image(self, batch: dict) -> torch.Tensor:
        """An image read as a sequence (rows or pixels) by the encoder, classified from its summary."""
        if "input" not in batch:
            raise ConfigError(IMAGES_AS_SEQUENCES)
        return self.classify(batch)

    def regress(self, batch: dict) -> torch.Tensor:
        return self.classify(batch).squeeze(-1)  # (B,)

    def tag(self, batch: dict) -> torch.Tensor:
        states, _ = self.encoder(self.encoder_input(batch), batch.get("lengths"))  # (B, T, D)
        return self.head(self.head_dropout(states))  # (B, T, K)
