"""`python -m seqbench.analysis.matrix_check`: a pair as a user types it, under a wall-clock budget,
set beside its task's trivial baseline."""

from __future__ import annotations

import math

import pytest

from seqbench.analysis import matrix_check
from seqbench.reports.ledger import Ledger


@pytest.mark.parametrize("value, base, higher, expected", [
    (0.8, 0.5, True, "beats baseline"), (0.5, 0.5, True, "NOT better than baseline"),
    (0.4, 0.5, True, "NOT better than baseline"), (0.01, 1 / 6, False, "beats baseline"),
    (0.17, 1 / 6, False, "NOT better than baseline"), (None, 0.5, True, "failed"), (0.3, None, True, "no baseline"),
])
def test_the_verdict_reads_the_metric_in_its_direction(value, base, higher, expected):
    assert matrix_check.verdict(value, base, higher) == expected


def test_pairs_take_the_readme_overrides():
    assert matrix_check.parse_pair("lstm:multi30k model.attention=bahdanau") == \
        ("lstm", "multi30k", ("model.attention=bahdanau",))
    assert matrix_check.metric_of("copy", "tagging") == ("test/loss", False)  # the copy probe's loss vs log 8
    assert matrix_check.metric_of("sst2", "classification") == ("test/acc", True)
    with pytest.raises(SystemExit, match="model:data"):
        matrix_check.parse_pair("lstm")


def test_the_unigram_baseline_is_the_perplexity_of_training_counts():
    # train: a a b (counts 2, 1 of vocabulary 2); add-one: p(a) = 3/5, p(b) = 2/5; test "a b"
    assert matrix_check._unigram_ppl([0, 0, 1], [0, 1]) == pytest.approx(math.exp(-(math.log(0.6) + math.log(0.4)) / 2))


@pytest.mark.corpus("sst2")
def test_a_pair_runs_as_typed_and_is_judged_against_the_majority_class(tmp_path):
    rows = matrix_check.main(["--pairs", "gru:sst2", "--budget", "3", "--out", str(tmp_path)])
    (row,) = rows
    assert row["metric"] == "test/acc" and row["recipe"] == "classification/gru"
    assert 0.45 < row["baseline"] < 0.55  # SST-2's test split is balanced
    assert 0.0 <= row["result"] <= 1.0  # an accuracy was read back from the run
    assert row["verdict"] == matrix_check.verdict(row["result"], row["baseline"], higher=True)
    assert "`model=gru data=sst2`" in (tmp_path / "matrix_check.md").read_text()


def test_models_keeps_only_their_pairs_and_the_table_is_recorded_apart_from_the_runs(tmp_path, monkeypatch):
    # bugs caught: --models ignored (every pair of the matrix runs), a model with no ✓ pair accepted
    # silently, the table written beside the runs' checkpoints (not committable), no ledger record, or a
    # skipped last pair missing from the table (it was written only after a pair that ran)
    ran = []

    def fake_run(model, data, extra, budget_s, out, data_dir, threads):
        ran.append((model, data, out))
        return {"command_s": 0.0, "test/acc": 0.9, "test/loss": 0.1, "test/mse": 0.01, "test/ppl": 10.0, "test/f1": 0.5}

    monkeypatch.setattr(matrix_check, "run_pair", fake_run)
    model = sorted({m for m, _ in matrix_check.pairs()})[0]
    last_data = [d for m, d in matrix_check.pairs() if m == model][-1]

    def fake_baseline(data, *a):
        if data == last_data:  # the last pair's corpus is missing: skipped, and still a row of the table
            raise FileNotFoundError("no offline copy")
        return 1.0

    monkeypatch.setattr(matrix_check, "baseline", fake_baseline)
    rows = matrix_check.main(["--models", model, "--out", str(tmp_path / "runs"), "--report", str(tmp_path / "experiments" / "table"),
                              "--threads", "1"])
    expected = {(m, d) for m, d in matrix_check.pairs() if m == model} | {
        (m, d) for m, d, _ in matrix_check.README_LINES if m == model}
    assert {(r["model"], r["data"]) for r in rows} == expected and all(o == tmp_path / "runs" for *_, o in ran)
    assert (tmp_path / "experiments" / "table" / "matrix_check.md").read_text().count("`model=") == len(expected)
    assert "torch threads per run: 1" in (tmp_path / "experiments" / "table" / "matrix_check.md").read_text()
    record = Ledger(tmp_path).record_of("experiments/table/matrix_check.csv")
    assert record.command.startswith("python -m seqbench.analysis.matrix_check --models")
    assert not (tmp_path / "runs" / "matrix_check.md").exists()
    with pytest.raises(SystemExit):
        matrix_check.main(["--models", "no_such_model", "--out", str(tmp_path / "x")])
