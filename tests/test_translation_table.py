"""The translation table under one label-smoothing rule (seqbench.analysis.translation_table), on
hand-made jobs with every expectation computed by hand."""

from __future__ import annotations

import pytest

from seqbench.analysis import translation_table as tt
from seqbench.report import Run


MODELS = {"bahdanau": "gru", "luong": "gru", "seq2seq": "lstm", "transformer": "transformer", "t5": "t5"}


def _job(family, smoothing, seed, bleu, failed=False, joint=False, ppl=20.0):
    metrics = {"status": "failed"} if failed else {"status": "completed", "test/bleu": bleu, "test/bleu_tok": bleu + 0.2,
                                                   "test/ppl": ppl, "curve/train_time_s": 600.0}
    return tt.Job(family, smoothing, seed, Run(f"{family}-{smoothing}-{seed}", family, metrics), joint, 10, 10,
                  MODELS[family])


def test_smoothing_is_compared_on_the_seeds_both_sides_ran():
    # with smoothing at seeds 1 and 2, without at seed 1 only: the difference is seed 1's (+1.00), not the
    # mean of both seeds against seed 1 (+3.00)
    jobs = [_job("bahdanau", 0.1, 1, 30.0), _job("bahdanau", 0.1, 2, 34.0), _job("bahdanau", 0.0, 1, 29.0)]
    (row,) = tt.smoothing_rows(jobs)
    assert row["with − without"] == "+1.00" and row["seeds paired"] == 1 and row["BLEU with"] == "30.00"
    assert row["seeds won by smoothing"] == "1 of 1"


def test_paired_differences_give_their_own_spread():
    jobs = [_job("transformer", 0.1, s, b) for s, b in ((1, 35.0), (2, 36.0))]
    jobs += [_job("transformer", 0.0, s, b) for s, b in ((1, 34.0), (2, 36.5))]
    (row,) = tt.smoothing_rows(jobs)
    # differences +1.0 and -0.5: mean +0.25, sd 1.06
    assert row["with − without"] == "+0.25 ± 1.06" and row["seeds won by smoothing"] == "1 of 2"


def test_a_failed_job_is_counted_apart_and_never_averaged():
    jobs = [_job("luong", 0.1, 1, 20.0), _job("luong", 0.1, 2, 0.0, failed=True), _job("luong", 0.1, 3, 22.0)]
    (row,) = tt.family_rows(jobs)
    assert row["seeds"] == "2 (1 failed)" and row["test BLEU"] == "21.00 ± 1.41" and row["per seed"] == "1: 20.00, 3: 22.00"


def test_a_joint_vocabulary_perplexity_is_marked_not_comparable():
    rows = {r["family"]: r for r in tt.family_rows([_job("t5", 0.1, 1, 30.0, joint=True, ppl=9.0),
                                                    _job("transformer", 0.1, 1, 35.0, ppl=7.0)])}
    assert rows["t5"]["test ppl"] == "9.00†" and rows["transformer"]["test ppl"] == "7.00"


def test_epochs_trained_count_the_epochs_that_ended_not_the_test_rows_epoch(tmp_path):
    # Lightning logs the test with epoch = the number of epochs trained: a reader of every row's epoch
    # would say 3 where 2 ran
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "metrics.csv").write_text(
        "epoch,step,train/loss,train/loss_epoch,test/bleu\n0,10,5.0,,\n0,20,,4.5,\n1,30,,4.0,\n2,30,,,31.0\n")
    assert tt._epochs_trained(tmp_path) == 2


def test_one_run_given_twice_stops_rather_than_counting_as_two_seeds():
    # the same sweep folder given twice, or a rerun: two seeds by count, and the pairing would keep whichever
    # was read last
    jobs = [_job("bahdanau", 0.1, 1, 30.0), _job("bahdanau", 0.1, 1, 20.0), _job("bahdanau", 0.0, 1, 25.0)]
    with pytest.raises(SystemExit, match="both bahdanau, label smoothing 0.1, seed 1"):
        tt.check_unique(jobs)


def test_a_job_is_read_from_its_folder_and_a_restored_one_says_its_epochs_are_unknown(tmp_path):
    # restored from the sweep archive: .hydra/ composed again, csv/metrics.csv the validation curve only
    job = tmp_path / "3"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "config.yaml").write_text(
        "seed: 2\nmodel:\n  label_smoothing: 0.1\ndata:\n  joint_vocab: true\ntrainer:\n  max_epochs: 10\n")
    (job / "csv").mkdir()
    (job / "csv" / "metrics.csv").write_text("step,val/ppl,val/loss\n100,20.0,3.0\n")
    run = Run("sweep/3", "t5", {"status": "completed", "test/bleu": 30.0, "test/ppl": 9.0,
                                "overrides": "preset=multi30k/t5 model.label_smoothing=0.1"}, path=job)
    j = tt.job_of(run)
    assert (j.family, j.smoothing, j.seed, j.joint_vocab, j.epochs_given, j.epochs_trained) == ("t5", 0.1, 2, True, 10, None)
    (row,) = tt.family_rows([j])
    assert row["epochs trained/given"] == "?/10" and row["test ppl"] == "9.00†"


def test_a_job_that_failed_before_its_folder_is_read_from_its_command_line():
    # the launcher's record: no folder, the family unknown ("job 3"), the overrides a list
    run = Run("job 3", "job 3", {"status": "failed", "overrides": ["preset=multi30k/t5", "model.label_smoothing=0.1",
                                                                   "seed=2"]})
    j = tt.job_of(run)
    assert (j.family, j.smoothing, j.seed) == ("t5", 0.1, 2)
    (row,) = tt.family_rows([j])
    assert row["family"] == "t5" and row["seeds"] == "0 (1 failed)" and row["test BLEU"] == "–"


def test_the_interval_is_the_t_interval_over_seeds_by_hand():
    # 35 and 36: mean 35.5, sd 0.7071, half-width t(0.975, 1) 12.706 x 0.7071 / sqrt(2) = 6.353
    (row,) = tt.family_rows([_job("transformer", 0.1, 1, 35.0), _job("transformer", 0.1, 2, 36.0)])
    assert row["95 % interval"] == "[29.15, 41.85]"
    (row,) = tt.family_rows([_job("transformer", 0.1, 1, 35.0)])
    assert row["95 % interval"] == "none: 1 seed"


def test_the_higher_bleu_wins_only_outside_the_intervals():
    # apart: the Transformer's [35.4, 36.6]-ish interval lies above the Bahdanau model's; a rule that took the
    # lowest mean as best (a loss's) would call the Bahdanau model the winner
    apart = [_job("transformer", 0.1, s, b) for s, b in ((1, 36.0), (2, 36.05))]
    apart += [_job("bahdanau", 0.1, s, b) for s, b in ((1, 30.0), (2, 30.05))]
    (line,) = tt.verdict_lines(apart)
    assert line.startswith("- Label smoothing 0.1: **transformer wins**")
    # the same means with a wide spread: the intervals overlap, a tie
    wide = [_job("transformer", 0.1, s, b) for s, b in ((1, 33.0), (2, 39.0))]
    wide += [_job("bahdanau", 0.1, s, b) for s, b in ((1, 30.0), (2, 30.1))]
    (line,) = tt.verdict_lines(wide)
    assert "**tie (transformer, bahdanau)**" in line and "best mean (transformer)" in line


def test_a_family_apart_below_a_tie_is_named_and_one_seed_never_wins():
    # the Transformer's [27.9, 43.2] takes in the Bahdanau model's, not the seq2seq model's [19.4, 20.7]
    jobs = [_job("transformer", 0.1, s, b) for s, b in ((1, 35.0), (2, 36.2))]
    jobs += [_job("bahdanau", 0.1, s, b) for s, b in ((1, 34.0), (2, 34.1))]
    jobs += [_job("seq2seq", 0.1, s, b) for s, b in ((1, 20.0), (2, 20.1))]
    (line,) = tt.verdict_lines(jobs)
    assert "**tie (transformer, bahdanau)**" in line and "below them and apart from them: seq2seq" in line
    # the pair without smoothing, one seed each: far apart in mean, still a tie
    (without,) = tt.verdict_lines([_job("transformer", 0.0, 1, 36.0), _job("bahdanau", 0.0, 1, 20.0)])
    assert "**tie (transformer, bahdanau)**" in without and "one seed gives no interval" in without


def test_the_bleu_record_gives_each_family_its_place_in_the_verdict_and_its_models_kind():
    # the findings' headline reads this record: a place or kind mixed up there (the Bahdanau model, a GRU with an
    # attention layer, counted as attention; a tie member called apart) changes its verdict
    jobs = [_job("transformer", 0.1, s, b) for s, b in ((1, 35.0), (2, 36.2))]
    jobs += [_job("bahdanau", 0.1, s, b) for s, b in ((1, 34.0), (2, 34.1))]
    jobs += [_job("seq2seq", 0.1, s, b) for s, b in ((1, 20.0), (2, 20.1))]
    jobs += [_job("t5", 0.0, 1, 30.0)]
    rows = {(r["label_smoothing"], r["family"]): r for r in tt.bleu_rows(jobs)}
    assert [(k[1], r["model"], r["kind"], r["verdict"]) for k, r in rows.items()] == [
        ("transformer", "transformer", "attention", "tie"), ("bahdanau", "gru", "recurrent", "tie"),
        ("seq2seq", "lstm", "recurrent", "apart"), ("t5", "t5", "attention", "alone")]
    # 34.0 and 34.1: mean 34.05, sd 0.0707, half-width 12.706 x 0.0707 / sqrt(2) = 0.635
    assert (rows[0.1, "bahdanau"]["low"], rows[0.1, "bahdanau"]["high"]) == (pytest.approx(33.415, abs=1e-3),
                                                                              pytest.approx(34.685, abs=1e-3))
    assert rows[0.0, "t5"]["bleu_sd"] == "" and rows[0.0, "t5"]["seeds"] == 1
