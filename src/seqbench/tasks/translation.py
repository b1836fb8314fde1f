"""Translation: teacher-forced token NLL (perplexity) and BLEU of decoded translations.

A family supports the task by implementing `translate_logits(batch) -> (B, T, V)`, the decoder's
logits under teacher forcing, and the decoding interface of `seqbench.nn.decoding` (`encode`,
`decode_step`), which the shared greedy and beam search use for every family alike.

Perplexity is exp(total NLL / total target tokens, <eos> included), accumulated exactly as in `lm`
(token-weighted `MeanMetric`), so it compares across families on one vocabulary. A family may train
with label smoothing (`model.label_smoothing`, Szegedy et al. 2016; Vaswani et al. §5.4): it
changes the training loss only, never the reported NLL.

BLEU is sacreBLEU's corpus BLEU on detokenised text against the raw reference lines (the
signature is logged and printed). `bleu_tok` is the variant comparable with numbers computed on
tokenised, lowercased text, such as bentrevett/pytorch-seq2seq's (torchtext `bleu_score` on spaCy
tokens): sacreBLEU with `lowercase=True` and its 13a (mteval) tokenizer on both sides — 4-gram
corpus BLEU over lowercased tokens. Validation decodes greedily every
`data.val_bleu_every_n_epochs` epochs and at the last one (decoding is slow on a CPU); test decodes
with beam search (`data.beam_size`, `data.length_penalty`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import sacrebleu
import torch
import torch.nn.functional as F
from torch import nn
from torchmetrics import MeanMetric

from seqbench.data.streams import IGNORE_INDEX
from seqbench.nn.decoding import beam_search, max_steps
from seqbench.tasks.lm import STAGES, log_perplexity, token_nll
from seqbench.tasks.samples import first_rows

log = logging.getLogger(__name__)


def bleu_metric(tokenised: bool = False) -> sacrebleu.metrics.BLEU:
    """The BLEU every translation score here is: 13a tokens of detokenised text, case kept, or lowercased
    (`tokenised`); one place, so the test BLEU and its bootstrap (`analysis.bleu_bootstrap`) agree."""
    return sacrebleu.metrics.BLEU(lowercase=tokenised, tokenize="13a")


def corpus_bleu(hypotheses: list[str], references: list[str], tokenised: bool = False) -> sacrebleu.metrics.BLEU:
    """The BLEU object (score + signature) of detokenised text, or of lowercased 13a tokens."""
    bleu = bleu_metric(tokenised)
    bleu.last_score = bleu.corpus_score(hypotheses, [references])
    return bleu


def write_translations(run_dir: Path, stage: str, hypotheses: list[str], references: list[str]) -> None:
    """The scored sentences, line by line in the split's order: `translations_<stage>.txt` (the decoded
    output) and `references_<stage>.txt` beside it, so that the logged BLEU can be read and recomputed
    from the run directory alone (`sacrebleu references_test.txt -i translations_test.txt`)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for name, lines in ((f"translations_{stage}.txt", hypotheses), (f"references_{stage}.txt", references)):
        (run_dir / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


class Translation(nn.Module):
    name = "translation"
    method = "translate_logits"
    directions = {"loss": "min", "ppl": "min", "bleu": "max", "bleu_tok": "max"}  # (seqbench.training.dashboard)

    @classmethod
    def from_spec(cls, spec) -> "Translation":
        return cls(spec)

    def __init__(self, spec) -> None:
        super().__init__()
        self.spec = spec
        self.options = spec.extras or {}
        for stage in STAGES:
            setattr(self, f"{stage}_nll", MeanMetric().set_dtype(torch.float64))
        self.outputs: dict[str, dict[int, str]] = {"val": {}, "test": {}}
        self.last_bleu: dict[str, object] = {}

    def count_tokens(self, batch: dict) -> int:
        return int((batch["target"] != IGNORE_INDEX).sum())

    def nll(self, stage: str) -> MeanMetric:
        return getattr(self, f"{stage}_nll")

    def decodes(self, model, stage: str) -> bool:
        if not self.options.get("bleu", True):  # e.g. span corruption: no reference translation
            return False
        if stage == "test":
            return True
        if stage != "val" or model.trainer is None or model.trainer.sanity_checking:
            return False
        every = int(self.options.get("val_bleu_every_n_epochs", 1) or 0)
        epoch, last = model.trainer.current_epoch, model.trainer.max_epochs
        return every > 0 and ((epoch + 1) % every == 0 or (last is not None and epoch + 1 >= last))

    def step(self, model, batch: dict, stage: str) -> torch.Tensor:
        logits = model.translate_logits(batch)  # (B, T, V)
        nll, n = token_nll(logits, batch["target"])
        loss = nll / n.clamp_min(1)
        self.nll(stage).update(loss.detach(), weight=n)
        if stage == "train":
            smoothing = float(getattr(model, "label_smoothing", 0.0) or 0.0)
            if smoothing:
                loss = F.cross_entropy(logits.flatten(0, 1).float(), batch["target"].flatten(),
                                       ignore_index=IGNORE_INDEX, label_smoothing=smoothing)
            model.log("train/loss", loss, prog_bar=True)
            return loss
        if self.decodes(model, stage):
            self.outputs[stage].update(zip(batch["index"].tolist(), self.translate(model, batch, stage)))
        return loss

    def translate(self, model, batch: dict, stage: str = "test") -> list[str]:
        """Decoded, detokenised translations of a batch (beam at test, `val_beam_size` at validation)."""
        o = self.options
        beam = int(o.get("beam_size", 5)) if stage == "test" else int(o.get("val_beam_size", 1))
        steps = max_steps(batch, float(o.get("max_len_a", 1.5)), int(o.get("max_len_b", 10)))
        ids = beam_search(model, batch, self.spec.bos_id, self.spec.eos_id, self.spec.pad_id, steps, beam,
                          float(o.get("length_penalty", 1.0)))
        return [self.spec.tokenizer.decode(row.tolist()) for row in ids]

    def samples(self, model, batch: dict, n: int):
        """Source, reference and greedy (`val_beam_size`) translation of the first `n` validation
        sentences; under span corruption the reference is the target the data built."""
        batch = first_rows(batch, n)
        hypotheses = self.translate(model, batch, "val")
        raw = self.options.get("bleu", True)  # else span corruption: the batch's own text is what was read
        sources, references = (self.options.get(key, {}).get("val") if raw else None
                               for key in ("sources", "references"))
        src_tok, tgt_tok = self.options.get("src_tokenizer", self.spec.tokenizer), self.spec.tokenizer
        rows = []
        for b, i in enumerate(batch["index"].tolist()):
            source = sources[i] if sources else src_tok.decode(batch["src"][b].tolist())
            target = [t for t in batch["target"][b].tolist() if t != IGNORE_INDEX]
            rows.append([source, references[i] if references else tgt_tok.decode(target), hypotheses[b]])
        return ["source", "reference", "hypothesis"], rows

    def reset(self, stage: str) -> None:
        self.nll(stage).reset()
        if stage in self.outputs:
            self.outputs[stage] = {}

    def epoch_end(self, model, stage: str) -> None:
        if not log_perplexity(model, self.nll(stage), stage):
            return
        if self.decodes(model, stage):  # the same answer on every rank, so the gather below cannot hang
            self.log_bleu(model, stage)

    def log_bleu(self, model, stage: str) -> None:
        outputs = self.outputs[stage]
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            gathered = [None] * torch.distributed.get_world_size()
            torch.distributed.all_gather_object(gathered, outputs)  # every rank decoded its own shard
            outputs = {k: v for part in gathered for k, v in part.items()}
        self.outputs[stage] = {}
        if not outputs:
            return
        refs_all = self.options["references"][stage]
        order = sorted(outputs)
        hyps, refs = [outputs[i] for i in order], [refs_all[i] for i in order]
        bleu, tok = corpus_bleu(hyps, refs), corpus_bleu(hyps, refs, tokenised=True)
        model.log(f"{stage}/bleu", bleu.last_score.score, prog_bar=True)
        model.log(f"{stage}/bleu_tok", tok.last_score.score)
        self.last_bleu[stage] = {"bleu": bleu.last_score.score, "bleu_tok": tok.last_score.score,
                                 "signature": str(bleu.get_signature()), "signature_tok": str(tok.get_signature()),
                                 "sentences": len(hyps), "examples": list(zip(order[:5], hyps[:5]))}
        root = getattr(model.trainer, "default_root_dir", None) if model._trainer is not None else None
        if root and model.trainer.is_global_zero:
            write_translations(Path(root), stage, hyps, refs)
        sources = self.options.get("sources", {}).get(stage, [])
        for i in order[:3]:  # a few examples beside the number
            log.info("%s example %d\n  source:    %s\n  reference: %s\n  output:    %s", stage, i,
                     sources[i] if i < len(sources) else "", refs_all[i], outputs[i])
        log.info("%s BLEU %.2f (%s); tokenised, lowercased BLEU %.2f (%s) on %d sentences", stage,
                 bleu.last_score.score, bleu.get_signature(), tok.last_score.score, tok.get_signature(), len(hyps))

    def summary(self) -> dict:
        """The last BLEU signatures, for the run's record beside the numbers."""
        out = {}
        for stage, info in self.last_bleu.items():
            out[f"{stage}/bleu_signature"] = info["signature"]
            out[f"{stage}/bleu_tok_signature"] = info["signature_tok"]
        return out
