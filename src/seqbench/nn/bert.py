"""BERT, the bidirectional Transformer encoder (Devlin et al. 2019), built from `seqbench.nn` blocks.

    pieces (B, T) -> token + segment + learned position embeddings -> LayerNorm -> dropout
                  -> n_layer post-LN blocks (self-attention over the whole pair, GELU FFN) -> states
    pooler:  tanh(W h_[CLS])  — the sentence vector NSP is trained on, and fine-tuning classifies

The pre-training heads sit outside the backbone so a checkpoint's backbone loads alone into a
fine-tuning model: the MLM head is BERT's transform (dense, GELU, LayerNorm) then a decoder tied to
the token embedding with its own bias; the NSP head is one linear layer on the pooler. Weights
~ N(0, 0.02) as in the paper's code; padding keys are masked out of attention.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from seqbench.nn.positions import LearnedPositions
from seqbench.nn.transformer import TransformerStack


@dataclass
class BertConfig:
    vocab_size: int
    context: int = 128  # the position table: the longest input
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 128
    dropout: float = 0.1
    segments: int = 2

    def to_dict(self) -> dict:
        return asdict(self)


def init_weights(module: nn.Module) -> None:
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class BertBackbone(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.seg_emb = nn.Embedding(cfg.segments, cfg.d_model)
        self.pos_emb = LearnedPositions(cfg.context, cfg.d_model)
        self.emb_norm = nn.LayerNorm(cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = TransformerStack(cfg.n_layer, cfg.d_model, cfg.n_head, 4 * cfg.d_model, cfg.dropout,
                                       norm_first=False, activation="gelu")
        self.pooler = nn.Linear(cfg.d_model, cfg.d_model)
        self.apply(init_weights)

    def forward(self, ids: Tensor, segments: Tensor | None = None, lengths: Tensor | None = None) -> Tensor:
        """ids (B, T) -> states (B, T, C); attention never reads positions at or past `lengths`."""
        B, T = ids.shape
        if segments is None:
            segments = torch.zeros_like(ids)
        h = self.tok_emb(ids) + self.seg_emb(segments) + self.pos_emb(T)  # (B, T, C)
        padding = None
        if lengths is not None and bool((lengths < T).any()):
            padding = torch.arange(T, device=ids.device)[None, :] >= lengths[:, None]  # (B, T) True = pad
        return self.blocks(self.drop(self.emb_norm(h)), key_padding_mask=padding)

    def pool(self, states: Tensor) -> Tensor:
        return torch.tanh(self.pooler(states[:, 0]))  # (B, C): the [CLS] position


class PretrainingHeads(nn.Module):
    def __init__(self, backbone: BertBackbone) -> None:
        super().__init__()
        C, V = backbone.cfg.d_model, backbone.cfg.vocab_size
        self.transform = nn.Sequential(nn.Linear(C, C), nn.GELU(), nn.LayerNorm(C))
        self.decoder = nn.Linear(C, V)
        self.apply(init_weights)
        self.decoder.weight = backbone.tok_emb.weight  # tied, as in BERT
        self.nsp = nn.Linear(C, 2)
        init_weights(self.nsp)

    def forward(self, states: Tensor, pooled: Tensor) -> tuple[Tensor, Tensor]:
        return self.decoder(self.transform(states)), self.nsp(pooled)  # (B, T, V), (B, 2)
