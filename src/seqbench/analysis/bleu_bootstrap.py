"""The test set's share of a BLEU gap: a paired bootstrap over the test sentences (Koehn 2004), seeds averaged.

The translation table's interval (`translation_table`) is over training seeds on one fixed test set
(Multi30k's test2016, 1,000 sentences): it says how much the gap moves with the seed, not with the choice of
sentences. This resamples the sentences with replacement, the same draw for every system, so the comparison
is paired; scores each family on the draw as the mean over its seeds of the corpus BLEU of those sentences;
and gives the 2.5 and 97.5 percentiles of the gap between two families over the draws. sacreBLEU's own
paired test (`sacrebleu --paired-bs`) compares one system with another; here each side is a family of
seeds. A corpus BLEU is computed from sums of per-sentence counts (n-gram matches and totals, lengths), so
each sentence's counts are taken once from sacreBLEU (`BLEU._extract_corpus_statistics`, what its paired
test uses) and a draw's score is sacreBLEU's BLEU of the counts the draw sums.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np

from seqbench.tasks.translation import (
    bleu_metric as _bleu,  # the table's test BLEU: detokenised, case kept, 13a
)

# 10,000 draws: at 1,000 the interval's ends carry ~0.1 BLEU of Monte-Carlo error, the size of the borderline
# cases the interval is read for; a pair takes about a second more
RESAMPLES = 10_000
SEED = 12345  # the draws are the same for every pair and every run of the table


def sentence_stats(hypotheses: list[str], references: list[str]) -> np.ndarray:
    """One row of sacreBLEU's counts per sentence (matches and totals of 1- to 4-grams, lengths)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} translations against {len(references)} references")
    return np.asarray(_bleu()._extract_corpus_statistics(hypotheses, [references]), dtype=np.int64)


@functools.lru_cache(maxsize=4)
def draws(sentences: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """How often each sentence is drawn in each resample (resamples x sentences); the same for every pair of a
    table, so drawn once (read-only: the cached array is shared)."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(sentences, np.full(sentences, 1.0 / sentences), size=resamples)
    counts.flags.writeable = False
    return counts


def scores(stats: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The corpus BLEU of each draw: the sentences' counts summed with the draw's multiplicities."""
    bleu = _bleu()
    return np.array([bleu._compute_score_from_stats(list(row)).score for row in counts @ stats])


def gap_interval(a: list[np.ndarray], b: list[np.ndarray], resamples: int = RESAMPLES, seed: int = SEED,
                 level: float = 0.95) -> tuple[float, float, float]:
    """(gap, low, high): family a's mean BLEU over its seeds minus family b's, on the whole test set, and the
    percentile interval of that gap over paired draws of the sentences. `a` and `b` hold each seed's
    `sentence_stats`."""
    sentences = {s.shape[0] for s in (*a, *b)}
    if len(sentences) != 1:
        raise ValueError(f"the systems scored different numbers of sentences: {sorted(sentences)}")
    counts = draws(sentences.pop(), resamples, seed)
    whole = np.ones((1, counts.shape[1]), dtype=np.int64)
    mean = lambda systems, c: np.mean([scores(s, c) for s in systems], axis=0)  # noqa: E731
    gaps = mean(a, counts) - mean(b, counts)
    tail = (1 - level) / 2 * 100
    return float((mean(a, whole) - mean(b, whole))[0]), float(np.percentile(gaps, tail)), float(np.percentile(gaps, 100 - tail))


def _lines(path: Path) -> list[str]:
    """One sentence a line, a final newline after the last (`write_translations`); a `\r` inside a sentence
    stays in it (newline=""), so no sentence moves onto another's reference."""
    with open(path, encoding="utf-8", newline="") as f:
        return f.read().split("\n")[:-1]


def run_stats(run_dir: Path, test_bleu: float | None = None) -> tuple[np.ndarray, str] | None:
    """A run's test translations and references (`tasks/translation.write_translations`) as sentence counts,
    with a digest of its references (every run of a comparison must have scored the same sentences in the
    same order); None where the run left none (a job restored from the sweep archive). With `test_bleu` (the
    run's record), the files' BLEU must be it: files from another run, or another checkpoint's, stop here."""
    hyp, ref = run_dir / "translations_test.txt", run_dir / "references_test.txt"
    if not (hyp.is_file() and ref.is_file()):
        return None
    try:
        stats = sentence_stats(_lines(hyp), _lines(ref))
    except ValueError as e:
        raise ValueError(f"{run_dir}: {e}") from None
    if test_bleu is not None:
        score = scores(stats, np.ones((1, len(stats)), dtype=np.int64))[0]
        if abs(score - test_bleu) > 0.01:  # logged as float32
            raise ValueError(f"{run_dir}: its translations score BLEU {score:.3f}, its record {test_bleu:.3f}")
    return stats, hashlib.sha256(ref.read_bytes()).hexdigest()
