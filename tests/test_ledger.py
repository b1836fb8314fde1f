"""The ledger: records refused without their machine and date, numbers that link to their file, every
committed result file covered by a record, and writers that record what they write."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from seqbench.provenance import write_record
from seqbench.reports.ledger import RECORD, Ledger, LedgerError, Number, read_record
from seqbench.provenance import NOT_RECORDED, cpu_model

ROOT = Path(__file__).resolve().parents[1]
# what a page reads numbers from; figures (PNG) and the folders' own README/record files are not numbers
RESULT_SUFFIXES = {".csv", ".json", ".md", ".log", ".yaml", ".txt"}
NOT_RESULTS = {RECORD, "README.md"}


def _ledger_with(tmp_path: Path, entry: dict) -> Path:
    folder = tmp_path / "experiments" / "figures" / "x"
    folder.mkdir(parents=True)
    (folder / "runs.csv").write_text("run,loss\na,1.5\n")
    (folder / RECORD).write_text(json.dumps({"page": "experiments/x.md", "records": [entry]}))
    return folder


@pytest.mark.parametrize("missing", ["hardware", "date"])
def test_a_record_without_hardware_or_date_is_refused_with_the_reason(tmp_path, missing):
    entry = {"files": ["runs.csv"], "hardware": "2-core CPU", "date": "2026-11-26", "command": "python x"}
    del entry[missing]
    _ledger_with(tmp_path, entry)
    with pytest.raises(LedgerError, match=f"figures/x/{RECORD} .*no {missing} recorded"):
        Ledger(tmp_path)
    entry[missing] = NOT_RECORDED  # saying so is no better than leaving it out
    (tmp_path / "experiments/figures/x" / RECORD).write_text(json.dumps({"records": [entry]}))
    with pytest.raises(LedgerError, match=f"no {missing} recorded"):
        Ledger(tmp_path)


def test_a_number_links_to_the_file_it_was_read_from(tmp_path):
    _ledger_with(tmp_path, {"files": ["runs.csv"], "hardware": "2-core CPU", "date": "2026-11-26"})
    ledger = Ledger(tmp_path)
    loss = float(ledger.rows("experiments/figures/x/runs.csv")[0]["loss"])
    number = ledger.number(loss, "experiments/figures/x/runs.csv", "{:.2f}")
    assert number.md() == "[1.50](figures/x/runs.csv)"  # from a page in experiments/
    assert number.md(".") == "[1.50](experiments/figures/x/runs.csv)"  # from the README
    assert ledger.record_of("experiments/figures/x/runs.csv").command == NOT_RECORDED  # unknown, not guessed
    with pytest.raises(LedgerError, match="in no record"):
        ledger.number(1.0, "experiments/figures/x/other.csv")


def test_a_committed_run_is_its_own_record_when_its_metrics_json_has_hardware_and_date(tmp_path):
    run = tmp_path / "experiments" / "records" / "run1"
    run.mkdir(parents=True)
    metrics = {"overrides": "model=lstm", "date": "2026-11-26T16:00:00+00:00", "hardware": "Intel Xeon, 2 cores",
               "git_commit": "abc1234", "wall_time_s": 12.4, "test/loss": 4.5}
    (run / "metrics.json").write_text(json.dumps(metrics))
    record = Ledger(tmp_path).record_of("experiments/records/run1/metrics.json")
    assert (record.command, record.hardware, record.wall_time) == ("python src/train.py model=lstm",
                                                                   "Intel Xeon, 2 cores", "12 s")
    del metrics["hardware"]  # a run from before the ledger
    (run / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(LedgerError, match="run1/metrics.json: no hardware recorded"):
        Ledger(tmp_path)


def test_a_record_that_lists_a_missing_file_is_refused(tmp_path):
    _ledger_with(tmp_path, {"files": ["runs.csv", "gone.csv"], "hardware": "2-core CPU", "date": "2026-11-26"})
    with pytest.raises(LedgerError, match="missing files gone.csv"):
        Ledger(tmp_path)


def test_every_committed_result_file_is_in_a_record_with_hardware_and_date():
    ledger = Ledger(ROOT)  # reading it checks every record's hardware and date
    covered = {p for r in ledger.records for p in r.paths}
    results = {p.relative_to(ROOT) for p in (ROOT / "experiments").glob("*/**/*")
               if p.is_file() and p.suffix in RESULT_SUFFIXES and p.name not in NOT_RESULTS}
    assert not sorted(results - covered), "result files no record.json covers (add their provenance)"


def test_write_record_keeps_other_files_records_and_replaces_its_own(tmp_path):
    for name in ("a.csv", "b.csv"):
        (tmp_path / name).write_text("x\n1\n")
    started = time.time()
    write_record(tmp_path, ["a.csv"], "python -m first", started)
    write_record(tmp_path, ["b.csv"], "python -m second", started)
    write_record(tmp_path, ["a.csv"], "python -m again", started)
    records = read_record(tmp_path / RECORD, tmp_path.parent)
    assert sorted((r.files, r.command) for r in records) == [(("a.csv",), "python -m again"),
                                                             (("b.csv",), "python -m second")]
    assert all(cpu_model() in r.hardware for r in records)
    assert all(datetime.fromisoformat(r.date) for r in records)


def test_number_paths_are_posix_relative_links():
    assert Number(2.0, Path("conf/model/gpt.yaml"), "2").md() == "[2](../conf/model/gpt.yaml)"
