"""Language modelling: next-token cross-entropy and perplexity over every target token.

Perplexity is exp(total NLL / total target tokens) over the whole split. It is accumulated as a
token-weighted mean of the NLL in a torchmetrics `MeanMetric` (float64), whose sums are reduced
across DDP ranks before the division — so the number is exact under any number of processes, and
it is never a mean of per-batch perplexities. Targets equal to `IGNORE_INDEX` (padding) count for
nothing.

Where the data says its tokens are bytes or characters (`spec.extras["token_unit"]`: enwik8), the
validation and test scores are also logged in bits per token (`val/bpc`, `test/bpc`: the same mean NLL in
nats divided by ln 2), the unit the character-level papers report. Corpora that do not say so (PTB, Tiny
Shakespeare) log what they always did.

Sparse targets (`spec.extras["sparse_targets"]`: MQAR, `seqbench.data.mqar`, scores the values at its
queries and ignores every other position): loss and perplexity are those of the scored targets as above,
computed with the output layer at the scored positions alone where the family can (`head_at_positions`:
the same loss and gradients, `seqbench.nn.positions_scored`), the next-token accuracy over the same targets
is added (`stage/acc`, torchmetrics' micro accuracy, so exact under DDP), and a step's tokens (throughput,
`curve/tokens`, the FLOPs counted from them) are the positions read, not the few that are scored. Those
FLOPs are the families' formulas, which count the head at every position: on MQAR they overstate what a
step computes by the head's share, alike for every family.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from seqbench.data.streams import IGNORE_INDEX
from seqbench.tasks.samples import one_line, until_eos

STAGES = ("train", "val", "test")
BIT_UNITS = ("byte", "char")  # token units whose scores are also read in bits per token


def token_nll(logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed NLL (float32 even under bf16 autocast) and the number of scored tokens."""
    nll = F.cross_entropy(logits.flatten(0, -2).float(), target.flatten(), ignore_index=IGNORE_INDEX,
                          reduction="sum")
    return nll, (target != IGNORE_INDEX).sum()


def log_perplexity(model, metric: MeanMetric, stage: str) -> bool:
    """Log `stage/loss` and `stage/ppl` from a token-weighted NLL metric and reset it; False if it saw
    no token. Shared by every task scored by per-token NLL (language modelling, translation)."""
    if metric.update_count == 0:
        return False
    nll = metric.compute().float()
    suffix = "_epoch" if stage == "train" else ""
    model.log(f"{stage}/loss{suffix}", nll, sync_dist=True)
    model.log(f"{stage}/ppl{suffix}", nll.exp(), sync_dist=True, prog_bar=stage == "val")
    metric.reset()
    return True


class LanguageModelling(nn.Module):
    name = "lm"
    method = "lm_logits"  # what a family implements to support this task
    directions = {"loss": "min", "ppl": "min"}  # which way each val/ metric improves (seqbench.training.dashboard)

    @classmethod
    def from_spec(cls, spec) -> "LanguageModelling":
        extras = spec.extras or {}
        return cls(bits=extras.get("token_unit") in BIT_UNITS,
                   accuracy_classes=spec.vocab_size if extras.get("sparse_targets") else None)

    def __init__(self, bits: bool = False, accuracy_classes: int | None = None) -> None:
        """`bits`: also log val/bpc and test/bpc; `accuracy_classes`: the vocabulary, on data with sparse
        targets (the module docstring); None otherwise."""
        super().__init__()
        # one metric object per stage (ModuleDict keys may not be "train": nn.Module.train exists)
        self.train_nll, self.val_nll, self.test_nll = (MeanMetric().set_dtype(torch.float64) for _ in STAGES)
        self.bits = bits
        if bits:
            self.directions = {**self.directions, "bpc": "min"}
        self.sparse = accuracy_classes is not None
        if self.sparse:
            for stage in STAGES:
                setattr(self, f"{stage}_acc", MulticlassAccuracy(accuracy_classes, average="micro",
                                                                 ignore_index=IGNORE_INDEX))
            self.directions = {**self.directions, "acc": "max"}

    def count_tokens(self, batch: dict) -> int:
        if self.sparse:  # every position is read and computed, though only a few are scored
            return batch["input"].numel()
        return int((batch["target"] != IGNORE_INDEX).sum())

    def step(self, model, batch: dict, stage: str) -> torch.Tensor:
        target = batch["target"]
        if self.sparse and getattr(model, "head_at_positions", False):  # the head at the scored positions alone
            scored = target != IGNORE_INDEX
            logits, target = model.lm_logits(batch, stage, positions=scored), target[scored]  # (N, V), (N,)
        else:
            logits = model.lm_logits(batch, stage)  # (B, T, V)
        nll, n = token_nll(logits, target)
        loss = nll / n.clamp_min(1)
        self.nll(stage).update(loss.detach(), weight=n)
        if self.sparse:
            self.acc(stage).update(logits.detach().argmax(-1), target)
        if stage == "train":
            model.log("train/loss", loss, prog_bar=True)
            model.log("train/ppl", loss.detach().exp(), prog_bar=True)
            # a family's own regulariser of this step (AWD-LSTM's AR/TAR): trained on, never scored
            take = getattr(model, "lm_penalty", None)
            penalty = take() if callable(take) else None
            if penalty is not None:
                model.log("train/penalty", penalty)
                loss = loss + penalty
        return loss

    def nll(self, stage: str) -> MeanMetric:
        return getattr(self, f"{stage}_nll")

    def acc(self, stage: str) -> MulticlassAccuracy:
        return getattr(self, f"{stage}_acc")

    def reset(self, stage: str) -> None:
        self.nll(stage).reset()
        if self.sparse:
            self.acc(stage).reset()

    def epoch_end(self, model, stage: str) -> None:
        metric = self.nll(stage)
        if self.bits and stage != "train" and metric.update_count:  # before log_perplexity resets it
            model.log(f"{stage}/bpc", metric.compute().float() / math.log(2), sync_dist=True)
        if log_perplexity(model, metric, stage) and self.sparse:
            model.log(f"{stage}/acc", self.acc(stage).compute(), sync_dist=True, prog_bar=stage == "val")
            self.acc(stage).reset()

    def samples(self, model, batch: dict, n: int, prompt_len: int = 12, new_tokens: int = 30):
        """Greedy continuations of the first `prompt_len` tokens of the first `n` validation rows
        (each row starts elsewhere in the split), each on one line and cut at its first `<eos>`
        (`seqbench.tasks.samples.until_eos`); None for a family that cannot generate (the HMM)."""
        tokenizer = model.spec.tokenizer
        if not callable(getattr(model, "generate", None)) or tokenizer is None:
            return None
        prompt = batch["input"][:n, :prompt_len]  # (n, P)
        out = model.generate(prompt, new_tokens, temperature=0.0)  # (n, P + new_tokens)
        P = prompt.size(1)
        eos = model.spec.eos_id
        return ["prompt", "continuation"], [[one_line(tokenizer.decode(row[:P].tolist())),
                                             until_eos(row[P:].tolist(), tokenizer, eos)] for row in out]
