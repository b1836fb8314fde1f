"""The paired sentence bootstrap of a BLEU gap (seqbench.analysis.bleu_bootstrap) against sacreBLEU computed by
brute force on the resampled sentences."""

from __future__ import annotations

import numpy as np
import pytest

from seqbench.analysis import bleu_bootstrap as bb
from seqbench.tasks.translation import corpus_bleu

# mixed case and punctuation: a bootstrap that lowercased or tokenised otherwise than the table's BLEU
# (tasks/translation.corpus_bleu) would score these differently
REFS = [f"A man in a {c} shirt is riding a {v}, down Main Street (number {i})."
        for i, (c, v) in enumerate(zip(["red", "blue", "green", "white"] * 10, ["bike", "horse", "car", "bus"] * 10))]
GOOD = list(REFS)
WORSE = [r.replace("riding", "driving").replace("Main", "main") if i % 3 == 0 else r for i, r in enumerate(REFS)]
BAD = [" ".join(r.split()[::-1]) if i % 2 == 0 else r for i, r in enumerate(REFS)]
OTHER = [r.replace("shirt", "coat").replace("down", "along") if i % 4 == 1 else r for i, r in enumerate(REFS)]


def test_a_draw_scores_what_sacrebleu_gives_the_resampled_sentences():
    # bug caught: the draw's multiplicities applied to the wrong axis, or counts summed once per distinct sentence
    stats = bb.sentence_stats(WORSE, REFS)
    idx = [0, 0, 3, 5, 5, 5, 17, 39, 22, 22]
    counts = np.bincount(idx, minlength=len(REFS))[None, :]
    expected = corpus_bleu([WORSE[i] for i in idx], [REFS[i] for i in idx]).last_score.score
    assert bb.scores(stats, counts)[0] == pytest.approx(expected, abs=1e-9)


def test_the_interval_is_the_percentiles_of_the_gaps_sacrebleu_gives_each_draw():
    # bug caught: the percentiles taken as fractions (np.percentile(gaps, 0.025): nearly the minimum), or the
    # draws scored with other BLEU settings than the table's
    n = 200
    counts = bb.draws(len(REFS), n)
    gap_of = lambda row: (corpus_bleu(*_drawn(GOOD, row)).last_score.score  # noqa: E731
                          - corpus_bleu(*_drawn(WORSE, row)).last_score.score)
    brute = [gap_of(row) for row in counts]
    _, low, high = bb.gap_interval([bb.sentence_stats(GOOD, REFS)], [bb.sentence_stats(WORSE, REFS)], resamples=n)
    assert (low, high) == (pytest.approx(np.percentile(brute, 2.5)), pytest.approx(np.percentile(brute, 97.5)))


def test_two_seeds_a_side_are_each_scored_on_the_same_draw():
    # bug caught: a family's seeds scored on different draws (seed i on draw k - i): the gap over the whole
    # set and one seed a side do not see it, the interval with two seeds a side is more than twice as wide
    n = 50
    counts = bb.draws(len(REFS), n)
    a, b = [GOOD, OTHER], [WORSE, BAD]
    mean_bleu = lambda seeds, row: np.mean([corpus_bleu(*_drawn(h, row)).last_score.score for h in seeds])  # noqa: E731
    brute = [mean_bleu(a, row) - mean_bleu(b, row) for row in counts]
    stats = lambda seeds: [bb.sentence_stats(h, REFS) for h in seeds]  # noqa: E731
    _, low, high = bb.gap_interval(stats(a), stats(b), resamples=n)
    want = np.percentile(brute, [2.5, 97.5])
    assert (low, high) == (pytest.approx(want[0]), pytest.approx(want[1])), \
        f"interval [{low:.2f}, {high:.2f}], by brute force [{want[0]:.2f}, {want[1]:.2f}]"


def _drawn(hyps, row):
    idx = [i for i, k in enumerate(row) for _ in range(k)]
    return [hyps[i] for i in idx], [REFS[i] for i in idx]


def test_the_gap_is_the_difference_of_seed_means_on_the_whole_test_set():
    a = [bb.sentence_stats(GOOD, REFS), bb.sentence_stats(WORSE, REFS)]
    b = [bb.sentence_stats(BAD, REFS)]
    gap, low, high = bb.gap_interval(a, b, resamples=200)
    whole = lambda hyps: corpus_bleu(hyps, REFS).last_score.score  # noqa: E731
    assert gap == pytest.approx((whole(GOOD) + whole(WORSE)) / 2 - whole(BAD), abs=1e-9)
    assert low < gap < high


def test_the_draws_are_paired_so_a_small_change_is_told_apart():
    # two systems that differ on every third sentence only: paired draws see the difference on every draw
    # (the interval lies above 0); a bootstrap drawing each system's sentences apart would put 0 inside it
    gap, low, high = bb.gap_interval([bb.sentence_stats(GOOD, REFS)], [bb.sentence_stats(WORSE, REFS)])
    assert 0 < low < gap < high
    same = bb.gap_interval([bb.sentence_stats(WORSE, REFS)], [bb.sentence_stats(WORSE, REFS)], resamples=50)
    assert same == (0.0, 0.0, 0.0)


def test_systems_scored_on_different_sentences_are_refused():
    with pytest.raises(ValueError, match="different numbers of sentences"):
        bb.gap_interval([bb.sentence_stats(GOOD, REFS)], [bb.sentence_stats(GOOD[:-1], REFS[:-1])])


def test_a_run_s_files_are_read_line_by_line_empty_translations_included(tmp_path):
    # an empty hypothesis is a line of its own: dropping it would shift every later sentence onto another reference
    hyps = ["", *WORSE[1:]]
    (tmp_path / "translations_test.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    (tmp_path / "references_test.txt").write_text("\n".join(REFS) + "\n", encoding="utf-8")
    stats, digest = bb.run_stats(tmp_path)
    assert (stats == bb.sentence_stats(hyps, REFS)).all() and len(digest) == 64
    assert bb.run_stats(tmp_path / "none") is None
