"""Stand-ins for tests: a DataModule posing a task the GPT family has no method for (translation
belongs to the encoder-decoder families: recurrent seq2seq, Transformer)."""

import lightning as L


class FakeTranslationData(L.LightningDataModule):
    task = "translation"

    def __init__(self, data_dir: str = "", batch_size: int = 1, eval_batch_size: int = 1, bptt: int = 1,
                 download: bool = True, eval_stride: int | None = None, seed: int = 0, variable_bptt: bool = False):
        super().__init__()


from seqbench.data.translation import TranslationDataModule  # noqa: E402


class ReversalTranslationData(TranslationDataModule):
    """A synthetic 'language pair': the target is the source read backwards (or in order, with
    `reverse=False`), each word aN spelt bN.

    Learnable in seconds by a tiny model with attention, and scored with the same BLEU as Multi30k.
    """

    corpus = "reversal"

    def __init__(self, cache_dir: str, sizes: tuple[int, int, int] = (2000, 100, 100), words: int = 12,
                 reverse: bool = True, **kwargs) -> None:
        kwargs.setdefault("vocab_size", 40)
        kwargs.setdefault("batch_size", 32)
        kwargs.setdefault("eval_batch_size", 50)
        super().__init__(data_dir="", cache_dir=cache_dir, source="src", target="tgt", **kwargs)
        self.sizes, self.words, self.reverse = sizes, words, reverse

    def split_pairs(self):
        import random

        rng = random.Random(0)
        out = {}
        for split, n in zip(("train", "valid", "test"), self.sizes):
            src = [[f"a{rng.randrange(self.words)}" for _ in range(rng.randint(3, 7))] for _ in range(n)]
            out[split] = ([" ".join(s) for s in src], [" ".join("b" + w[1:] for w in (s[::-1] if self.reverse else s)) for s in src])
        return out

    def checksums(self):
        return {"sizes": str(self.sizes), "words": str(self.words), "reverse": str(self.reverse)}
