"""T5's pre-training objective, span corruption (Raffel et al. 2020, §3.1.4), as a text-to-text task.

About 15% of each sentence's tokens, in spans of 3 on average, are dropped from the input and each
span is replaced by one sentinel; the target spells the dropped spans, each after its sentinel:

    original   Thank you for inviting me to your party last week .
    input      Thank you <X> me to your party <Y> week .
    target     <X> for inviting <Y> last <Z>

Posed as the `translation` task (input -> target), so any encoder-decoder family trains on it with
the same loss and perplexity, and the spans are drawn afresh every epoch (fixed for validation and
test). `data=multi30k_span` reads the Multi30k captions of one language as monolingual text;
BLEU is not computed (there is no reference translation).
"""

from __future__ import annotations

import random

from seqbench.data.multi30k import Multi30kDataModule
from seqbench.data.spec import TaskSpec


def random_segments(total: int, parts: int, rng: random.Random) -> list[int]:
    """`total` split into `parts` positive lengths, uniformly among such splits."""
    cuts = sorted(rng.sample(range(1, total), parts - 1)) if parts > 1 else []
    return [b - a for a, b in zip([0] + cuts, cuts + [total])]


def span_corrupt(ids: list[int], sentinel_ids: list[int], rng: random.Random, noise_density: float = 0.15,
                 mean_span: float = 3.0) -> tuple[list[int], list[int]]:
    """-> (input ids, target ids) as in the picture above (T5's `random_spans_noise_mask`)."""
    n = len(ids)
    noise = min(max(int(round(n * noise_density)), 1), n - 1) if n > 1 else 0
    if noise == 0:
        return list(ids), [sentinel_ids[0]]
    spans = min(max(int(round(noise / mean_span)), 1), noise, n - noise, len(sentinel_ids) - 1)
    noise_lengths, keep_lengths = random_segments(noise, spans, rng), random_segments(n - noise, spans, rng)
    inputs, targets, pos = [], [], 0
    for s, (keep, drop) in enumerate(zip(keep_lengths, noise_lengths)):
        inputs += ids[pos: pos + keep] + [sentinel_ids[s]]
        targets += [sentinel_ids[s]] + ids[pos + keep: pos + keep + drop]
        pos += keep + drop
    return inputs, targets + [sentinel_ids[spans]]


class SpanCorruptionDataModule(Multi30kDataModule):
    """Monolingual Multi30k captions (`data.target`'s language) corrupted into input/target pairs."""

    def __init__(self, *args, sentinels: int = 100, noise_density: float = 0.15, mean_span: float = 3.0,
                 **kwargs) -> None:
        kwargs.setdefault("joint_vocab", True)
        kwargs.setdefault("val_bleu_every_n_epochs", 0)
        super().__init__(*args, **kwargs)
        self.sentinels, self.noise_density, self.mean_span = sentinels, noise_density, mean_span

    def split_pairs(self) -> dict[str, tuple[list[str], list[str]]]:
        texts = super().split_pairs()
        return {split: (tgt, tgt) for split, (_, tgt) in texts.items()}

    def transform(self, pair: tuple[int, list[int], list[int]], epoch: int) -> tuple[int, list[int], list[int]]:
        index, ids, _ = pair
        rng = random.Random(hash((self.seed, epoch, index)))
        first = self.src_tok.tokenizer.token_to_id("<extra_id_0>")
        inputs, targets = span_corrupt(ids, list(range(first, first + self.sentinels)), rng, self.noise_density,
                                       self.mean_span)
        return index, inputs, targets

    @property
    def spec(self) -> TaskSpec:
        spec = super().spec
        spec.extras = {**spec.extras, "bleu": False, "direction": None}
        return spec
