"""The translation table under one label-smoothing rule (seqbench.reports.translation_table), its jobs
(translation_jobs) and its verdict (translation_verdict), on hand-made jobs with every expectation computed
by hand."""

from __future__ import annotations

import pytest

from seqbench.reports import translation_jobs as tj
from seqbench.reports import translation_table as tt
from seqbench.reports import translation_verdict as tv
from seqbench.training.record import Run


MODELS = {"bahdanau": "gru", "luong": "gru", "seq2seq": "lstm", "transformer": "transformer", "t5": "t5"}


LAYERS = {"bahdanau": "bahdanau", "luong": "luong_general", "seq2seq": "none"}


def _job(family, smoothing, seed, bleu, failed=False, joint=False, ppl=20.0, status="failed"):
    metrics = {"status": status} if failed else {"status": "completed", "test/bleu": bleu, "test/bleu_tok": bleu + 0.2,
                                                 "test/ppl": ppl, "curve/train_time_s": 600.0,
                                                 "curve/train_cpu_s": 480.0}
    return tj.Job(family, smoothing, seed, Run(f"{family}-{smoothing}-{seed}", family, metrics), joint, 10, 10,
                  MODELS[family], LAYERS.get(family), None if failed else bleu - 1.0)


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


def test_epochs_trained_count_the_epochs_that_ended_and_the_best_validation_bleu_is_the_highest(tmp_path):
    # Lightning logs the test with epoch = the number of epochs trained: a reader of every row's epoch
    # would say 3 where 2 ran; the validation BLEU a family is chosen on is its best, not its last (20.5)
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "metrics.csv").write_text(
        "epoch,step,train/loss,train/loss_epoch,val/bleu,test/bleu\n0,10,5.0,,,\n0,20,,4.5,21.0,\n1,30,,4.0,20.5,\n"
        "2,30,,,,31.0\n")
    assert tj._history(tmp_path) == (2, 21.0)


def test_one_run_given_twice_stops_rather_than_counting_as_two_seeds():
    # the same sweep folder given twice, or a rerun: two seeds by count, and the pairing would keep whichever
    # was read last
    jobs = [_job("bahdanau", 0.1, 1, 30.0), _job("bahdanau", 0.1, 1, 20.0), _job("bahdanau", 0.0, 1, 25.0)]
    with pytest.raises(SystemExit, match="both bahdanau, label smoothing 0.1, seed 1"):
        tj.check_unique(jobs)


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
    j = tj.job_of(run)
    assert (j.family, j.smoothing, j.seed, j.joint_vocab, j.epochs_given, j.epochs_trained) == ("t5", 0.1, 2, True, 10, None)
    (row,) = tt.family_rows([j])
    assert row["epochs trained/given"] == "?/10" and row["test ppl"] == "9.00†"


def test_a_job_that_failed_before_its_folder_is_read_from_its_command_line():
    # the launcher's record: no folder, the family unknown ("job 3"), the overrides a list
    run = Run("job 3", "job 3", {"status": "failed", "overrides": ["preset=multi30k/t5", "model.label_smoothing=0.1",
                                                                   "seed=2"]})
    j = tj.job_of(run)
    assert (j.family, j.smoothing, j.seed) == ("t5", 0.1, 2)
    (row,) = tt.family_rows([j])
    assert row["family"] == "t5" and row["seeds"] == "0 (1 failed)" and row["test BLEU"] == "–"


def test_the_interval_is_the_t_interval_over_seeds_by_hand():
    # 35 and 36: mean 35.5, sd 0.7071, half-width t(0.975, 1) 12.706 x 0.7071 / sqrt(2) = 6.353
    (row,) = tt.family_rows([_job("transformer", 0.1, 1, 35.0), _job("transformer", 0.1, 2, 36.0)])
    assert row["95 % interval"] == "[29.15, 41.85]"
    (row,) = tt.family_rows([_job("transformer", 0.1, 1, 35.0)])
    assert row["95 % interval"] == "none: 1 seed"


def _lines(jobs):
    return tv.verdict_lines(tv.bleu_rows(jobs))


def test_the_higher_bleu_wins_only_outside_the_intervals():
    # apart: the Transformer's [35.4, 36.6]-ish interval lies above the Bahdanau model's; a rule that took the
    # lowest mean as best (a loss's) would call the Bahdanau model the winner
    apart = [_job("transformer", 0.1, s, b) for s, b in ((1, 36.0), (2, 36.05))]
    apart += [_job("bahdanau", 0.1, s, b) for s, b in ((1, 30.0), (2, 30.05))]
    (line,) = _lines(apart)
    assert line.startswith("Verdict at label smoothing 0.1: **transformer wins**")
    # the same means with a wide spread: the intervals overlap, a tie
    wide = [_job("transformer", 0.1, s, b) for s, b in ((1, 33.0), (2, 39.0))]
    wide += [_job("bahdanau", 0.1, s, b) for s, b in ((1, 30.0), (2, 30.1))]
    (line,) = _lines(wide)
    assert "**tie (transformer, bahdanau)**" in line and "best mean (transformer)" in line


def test_below_is_said_of_the_best_mean_s_interval_not_of_the_whole_tie():
    # bug caught: seq2seq [27.8, 30.4] lies below the Transformer's [39.8, 42.4] but inside the Bahdanau model's
    # wide interval, and the line called it "apart from them" (the tie)
    jobs = [_job("transformer", 0.1, s, b) for s, b in ((1, 41.0), (2, 41.2))]
    jobs += [_job("bahdanau", 0.1, s, b) for s, b in ((1, 30.0), (2, 41.0))]
    jobs += [_job("seq2seq", 0.1, s, b) for s, b in ((1, 29.0), (2, 29.2))]
    (line,) = _lines(jobs)
    assert "**tie (transformer, bahdanau)**" in line and "below the best mean's interval: seq2seq" in line
    assert "apart from them" not in line


def test_a_family_without_an_interval_is_not_ranked_and_cannot_hide_a_separation():
    # bugs caught: one seed of T5 (its second failed) at the highest mean, with an infinite interval, made the
    # whole table a tie although the Transformer lies far above seq2seq; two identical seeds (sd 0) gave a
    # point interval that let any gap win
    jobs = [_job("transformer", 0.1, s, b) for s, b in ((1, 36.0), (2, 36.05))]
    jobs += [_job("t5", 0.1, 1, 37.0), _job("t5", 0.1, 2, 0.0, failed=True)]
    jobs += [_job("bahdanau", 0.1, s, 35.99) for s in (1, 2)]
    jobs += [_job("seq2seq", 0.1, s, b) for s, b in ((1, 20.0), (2, 20.05))]
    rows = {r["family"]: r["verdict"] for r in tv.bleu_rows(jobs)}
    assert rows == {"transformer": "won", "t5": "unranked: one seed; 1 failed", "bahdanau": "unranked: identical seeds",
                    "seq2seq": "below"}
    (line,) = tv.verdict_lines(tv.bleu_rows(jobs))
    assert "**transformer wins**" in line and "not ranked: t5 (one seed; 1 failed), bahdanau (identical seeds)" in line
    # the pair without smoothing, one seed each: far apart in mean, no ranking
    (without,) = _lines([_job("transformer", 0.0, 1, 36.0), _job("bahdanau", 0.0, 1, 20.0)])
    assert "**no ranking**" in without and "not ranked: transformer (one seed), bahdanau (one seed)" in without


def test_a_family_still_running_has_a_row_that_says_so_and_no_score():
    # bug caught: the record held only families with a finished job, so while T5's two seeds trained the findings
    # named the verdict's families without a word of the one it did not hold yet
    jobs = [_job("transformer", 0.1, s, b) for s, b in ((1, 35.0), (2, 36.2))]
    jobs += [_job("bahdanau", 0.1, s, b) for s, b in ((1, 34.0), (2, 34.1))]
    jobs += [_job("t5", 0.1, s, 0.0, failed=True, status="running") for s in (1, 2)]
    jobs += [_job("luong", 0.1, 1, 0.0, failed=True, status="running"), _job("luong", 0.1, 2, 0.0, failed=True)]
    rows = {r["family"]: r for r in tv.bleu_rows(jobs)}
    assert {f: r["verdict"] for f, r in rows.items()} == {
        "transformer": "tie", "t5": "unranked: 2 running", "bahdanau": "tie", "luong": "unranked: 1 failed, 1 running"}
    assert (rows["t5"]["seeds"], rows["t5"]["bleu_mean"], rows["t5"]["kind"], rows["t5"]["epochs_given"]) == (
        0, "", "attention", "10")
    (line,) = tv.verdict_lines(list(rows.values()))
    assert "**tie (transformer, bahdanau)**" in line and "not ranked: t5 (2 running), luong (1 failed, 1 running)" in line


def test_a_running_job_of_a_model_without_a_kind_stops_the_table_too():
    # bug caught: the skip meant for a job that failed before writing its configuration (no model, no family) also
    # left out a running job whose model the registry does not know, until it ended and stopped the table
    job = _job("t5", 0.1, 1, 0.0, failed=True, status="running")
    job.model = "mystery"
    with pytest.raises(SystemExit, match="mystery"):
        tv.bleu_rows([job, *(_job("transformer", 0.1, s, b) for s, b in ((1, 35.0), (2, 36.0)))])


def test_the_bleu_record_gives_each_family_its_place_its_model_its_kind_and_its_validation_bleu():
    # the findings' headline reads this record: a place or kind mixed up there (the Bahdanau model, a GRU with an
    # attention layer, counted as attention) changes its verdict; the validation BLEU is what it chooses on
    jobs = [_job("transformer", 0.1, s, b) for s, b in ((1, 35.0), (2, 36.2))]
    jobs += [_job("bahdanau", 0.1, s, b) for s, b in ((1, 34.0), (2, 34.1))]
    jobs += [_job("seq2seq", 0.1, s, b) for s, b in ((1, 20.0), (2, 20.1))]
    jobs += [_job("t5", 0.0, 1, 30.0)]
    rows = {(r["label_smoothing"], r["family"]): r for r in tv.bleu_rows(jobs)}
    assert [(k[1], r["model"], r["attention_layer"], r["kind"], r["verdict"]) for k, r in rows.items()] == [
        ("transformer", "transformer", "", "attention", "tie"), ("bahdanau", "gru", "bahdanau", "recurrent", "tie"),
        ("seq2seq", "lstm", "none", "recurrent", "below"), ("t5", "t5", "", "attention", "unranked: one seed")]
    # 34.0 and 34.1: mean 34.05, sd 0.0707, half-width 12.706 x 0.0707 / sqrt(2) = 0.635
    assert (rows[0.1, "bahdanau"]["low"], rows[0.1, "bahdanau"]["high"]) == (pytest.approx(33.415, abs=1e-3),
                                                                              pytest.approx(34.685, abs=1e-3))
    assert rows[0.1, "bahdanau"]["val_bleu_mean"] == pytest.approx(34.05 - 1.0)  # each seed's val BLEU: test - 1
    assert rows[0.0, "t5"]["bleu_sd"] == "" and rows[0.0, "t5"]["seeds"] == 1
    assert (rows[0.1, "seq2seq"]["epochs_given"], rows[0.1, "seq2seq"]["epochs_trained"]) == ("10", 10)


def test_a_family_whose_model_has_no_kind_stops_the_table():
    # bug caught: a model the registry does not know had kind "" and the headline silently left it out
    job = _job("bahdanau", 0.1, 1, 30.0)
    job.model = "mystery"
    with pytest.raises(SystemExit, match="bahdanau: its model \\(mystery\\) has no kind"):
        tv.bleu_rows([job])


def test_a_table_with_no_test_bleu_yet_still_writes_its_record(tmp_path):
    # bug caught: with every job failed (or none tested yet) bleu.csv's header came from its first row: IndexError
    # after translation.md was written and before record.json, leaving files without provenance
    job = tmp_path / "sweep" / "0"
    job.mkdir(parents=True)
    (job / "metrics.json").write_text('{"status": "failed", "error": "killed"}')
    tt.main([str(tmp_path / "sweep"), "--report", str(tmp_path / "out")])
    assert (tmp_path / "out" / "bleu.csv").read_text().startswith("label_smoothing,family,model")
    assert (tmp_path / "out" / "record.json").is_file()


def test_the_markdown_table_has_the_columns_the_csv_is_written_with():
    # bug caught: a column added to the rows but not to FAMILY_FIELDS makes csv.DictWriter raise at --report
    (row,) = tt.family_rows([_job("transformer", 0.1, 1, 35.0), _job("transformer", 0.1, 2, 36.0)])
    assert tuple(row) == tt.FAMILY_FIELDS and row["best val BLEU"] == "34.50 ± 0.71"
    # the cost is the CPU time, apart from the wall clock a paused or shared run inflates: one read for the other
    # would give the seq2seq model's 61 CPU minutes as 85
    assert (row["training CPU min"], row["training wall min"]) == ("8", "10")


def test_each_attention_family_is_bootstrapped_against_each_recurrent_one_from_the_runs_translations(tmp_path):
    # bugs caught: a pair of one kind compared, a family's seeds not averaged, a pair with a seed's translations
    # missing (a job restored from the archive) bootstrapped on fewer seeds than its BLEU is over
    import sacrebleu

    refs = [f"a dog runs across the {w} field number {i}" for i, w in enumerate(["green", "wide", "open", "wet"] * 5)]
    outputs = {"transformer": [refs, refs], "t5": [refs, None],
               "bahdanau": [[r.replace("runs", "walks") for r in refs], [r.replace("dog", "cat") for r in refs]]}
    jobs = _runs_on_disk(tmp_path, refs, outputs)
    (row,) = tt.gap_rows(jobs, tv.bleu_rows(jobs))
    bleu = lambda hyps: sacrebleu.corpus_bleu(hyps, [refs]).score  # noqa: E731
    assert (row["attention"], row["recurrent"], row["seeds"], row["sentences"]) == ("transformer", "bahdanau", "2, 2", 20)
    assert row["gap"] == pytest.approx(100.0 - (bleu(outputs["bahdanau"][0]) + bleu(outputs["bahdanau"][1])) / 2)
    assert 0 < row["low"] <= row["gap"] <= row["high"]


def _runs_on_disk(root, refs, outputs, logged=None, references=None):
    """Jobs whose folders hold their test translations (None: none, as a job restored from the archive) and
    the references they scored, each with its metrics.json BLEU (`logged`, else the files' own)."""
    import sacrebleu

    jobs = []
    for family, per_seed in outputs.items():
        for seed, hyps in enumerate(per_seed, 1):
            scored = (references or {}).get((family, seed), refs)
            score = sacrebleu.corpus_bleu(hyps, [scored]).score if hyps is not None else 30.0
            job = _job(family, 0.1, seed, (logged or {}).get((family, seed), score))
            job.run.path = root / f"{family}{seed}"
            job.run.path.mkdir(parents=True)
            if hyps is not None:
                (job.run.path / "translations_test.txt").write_text("\n".join(hyps) + "\n")
                (job.run.path / "references_test.txt").write_text("\n".join(scored) + "\n")
            jobs.append(job)
    return jobs


def test_translations_that_are_not_the_runs_own_or_score_other_references_stop_the_bootstrap(tmp_path):
    # bugs caught: gaps.csv's gap silently apart from bleu.csv's (files left from another checkpoint's test);
    # runs that scored other sentences, or the same in another order, paired sentence by sentence
    refs = [f"A dog runs across the {w} field, number {i}." for i, w in enumerate(["green", "wide", "open", "wet"] * 5)]
    outputs = {"transformer": [refs, refs], "bahdanau": [[r.replace("runs", "walks") for r in refs]] * 2}
    jobs = _runs_on_disk(tmp_path / "a", refs, outputs, logged={("bahdanau", 2): 99.0})
    with pytest.raises(ValueError, match="bahdanau2: its translations score BLEU .*, its record 99.000"):
        tt.gap_rows(jobs, tv.bleu_rows(jobs))
    jobs = _runs_on_disk(tmp_path / "b", refs, {"transformer": [refs[::-1], refs], "bahdanau": outputs["bahdanau"]},
                         references={("transformer", 1): refs[::-1]})
    with pytest.raises(SystemExit, match="scored different references"):
        tt.gap_rows(jobs, tv.bleu_rows(jobs))


def test_a_family_ranked_alone_is_named():
    jobs = [_job("transformer", 0.1, s, b) for s, b in ((1, 36.0), (2, 36.5))] + [_job("bahdanau", 0.1, 1, 30.0)]
    (line,) = _lines(jobs)
    assert "**no ranking**" in line and "(ranked alone: transformer)" in line and "not ranked: bahdanau (one seed)" in line
