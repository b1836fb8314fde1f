"""The committed sweep archive (seqbench.protocol.sweep_archive): a finished job survives the loss of its output
folder, is found by what it trains and nothing else, and a row of a committed trials.csv rebuilds the
metrics the tuning record read from it."""

from __future__ import annotations

import csv
import json
import os
import shutil

import pytest
from omegaconf import OmegaConf

from conftest import ROOT, compose_raw, run_cli
from seqbench.protocol.tuning_trials import from_metrics
from seqbench.protocol.chain import Chain
from seqbench.protocol.final_cells import Experiment
from seqbench.protocol.sweep_archive import Archive, from_trials, job_key, make_key, metrics_of_row, rest_of, same_job

TRIALS = ROOT / "experiments" / "figures" / "tuning-search-ptb" / "trials.csv"


def test_the_key_leaves_out_the_logger_and_what_its_fields_hold_and_parses_values():
    # a key that kept `logger=csv` would miss the archive after a relaunch with W&B; one that kept the
    # string "16" would miss a job whose override reads 16.0
    assert rest_of(["experiment=tune_frontier_ptb", "logger=csv", "tune.lr_scale=0.5", "hydra.launcher.jobs=2",
                    "tune.schedule=null", "model.hidden_size=16", "preset=frontier/ptb/lstm"]) == \
        {"experiment": "tune_frontier_ptb", "tune.schedule": None, "model.hidden_size": 16,
         "preset": "frontier/ptb/lstm"}
    assert make_key("lstm", "m", "1e12", "0.50", "128.0", 1234, {}) == make_key("lstm", "m", 1e12, 0.5, 128, "1234", {})
    assert make_key("lstm", "m", 1e12, 0.5, 128, 1234, {}) != make_key("lstm", "m", 1e12, 0.5, 128, 2, {})


def test_a_job_is_keyed_by_what_it_trains(tmp_path):
    base = ["experiment=tune_frontier_ptb", "preset=frontier/ptb/lstm", "budget.flops=1e12", "tune.lr_scale=2",
            "tune.tokens_per_step=256"]  # a sweep job: the sweeper adds its params as overrides
    key = job_key(compose_raw(base + ["logger=csv"], tmp_path))
    assert key == make_key("lstm", "m", 1e12, 2, 256, 1234,
                           {"experiment": "tune_frontier_ptb", "preset": "frontier/ptb/lstm"})
    assert job_key(compose_raw(base, tmp_path)) == key  # the logger does not change what is trained
    assert job_key(compose_raw(base + ["model.dropout=0.3"], tmp_path)) != key
    # one family, two models: the forget-bias-1 LSTM of the probes is not the plain one
    probe = ["experiment=long_range_lr", "data.T=100", "tune.lr_scale=1"]
    plain, fb1 = (job_key(compose_raw(probe + [f"preset=probe/{p}"], tmp_path)) for p in ("lstm", "lstm_fb1"))
    assert plain["family"] == fb1["family"] == "lstm" and plain != fb1
    # tune.per_family's entry is the setting the job trains with, whatever tune.lr_scale says
    per_family = ["experiment=tune_frontier_ptb", "preset=frontier/ptb/lstm", "tune.lr_scale=1",
                  "tune.tokens_per_step=null", "+tune.per_family={lstm: {lr_scale: 2, tokens_per_step: 256, size: l}}"]
    assert job_key(compose_raw(per_family, tmp_path))["lr_scale"] == 2.0
    assert job_key(compose_raw(per_family, tmp_path))["size"] == "l"


def test_a_job_folder_holds_the_same_job_whatever_the_order_and_logger_of_its_overrides():
    ran = ["preset=ptb/lstm", "budget.flops=1e12", "logger=csv", "tune.per_family={lstm:{lr_scale:2}}"]
    assert same_job(ran, ["tune.per_family={lstm: {lr_scale: 2}}", "budget.flops=1000000000000.0",
                          "preset=ptb/lstm", "logger=wandb", "hydra.launcher.jobs=2"])
    assert not same_job(ran, ["preset=ptb/lstm", "budget.flops=3e12", "tune.per_family={lstm:{lr_scale:2}}"])
    assert not same_job(ran, ["preset=ptb/gru", "budget.flops=1e12", "tune.per_family={lstm:{lr_scale:2}}"])
    assert not same_job(ran, [*ran, "seed=2"])


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("source", ["tuning-search-ptb/trials.csv", "tuning-search-ptb/baseline.csv"])
def test_a_trials_row_rebuilds_the_metrics_the_record_read(source):
    # the inverse of tuning_trials.from_metrics: a field lost or renamed would change the restored search
    rows = _rows(ROOT / "experiments" / "figures" / source)
    assert rows
    for row in rows:
        if row["status"] not in ("completed", "diverged"):
            continue
        trial = from_metrics(row["job"], row["family"], row["corpus"], metrics_of_row(row))
        assert trial.status == row["status"]
        assert trial.loss == (float(row["val_loss_best"]) if row["val_loss_best"] else None)
        assert trial.lr_scale == float(row["lr_scale"])
        # told by metrics.json alone, the grid point is the tokens the asked number rounded to (the
        # restored job's saved config gives the asked number itself, as it did when it ran)
        assert (trial.tokens_grid is None) == (not row["tokens_per_step_grid"])
        assert trial.tokens_per_step == int(row["tokens_per_step"])
        assert trial.steps == int(row["steps"]) and trial.size == row["size"]
        assert trial.untuned == source.endswith("baseline.csv")


def test_a_trials_row_keeps_its_cpu_cost_through_the_round_trip():
    # bug caught: a row rebuilt into metrics kept only wall_time_s, so a trial's cost read 4x its CPU
    # seconds once restored from trials.csv (seqbench.training.clocks: a paused or shared one-thread CPU run)
    row = {"job": "s/0", "family": "lstm", "corpus": "ptb", "status": "completed", "val_loss_best": "5.0",
           "lr_scale": "1", "steps": "10", "tokens_per_step": "700", "tokens_per_step_grid": "", "size": "m",
           "wall_time_s": "200.0", "cost_s": "50.0", "device": "cpu (x86_64, 1 threads) x1"}
    assert from_metrics("s/0", "lstm", "ptb", metrics_of_row(row)).cost_s == 50.0
    gpu = {**row, "device": "NVIDIA H200 x1", "cost_s": "200.0"}
    assert from_metrics("s/0", "lstm", "ptb", metrics_of_row(gpu)).cost_s == 200.0


def test_the_rebuilt_rows_are_found_by_the_keys_the_launcher_computes(tmp_path):
    """A rebuilt row under another key than the relaunched job's would be run again: hours, silently."""
    untuned = Chain("tune_frontier_ptb", tmp_path).untuned()[0][1]
    presets = Experiment("tune_frontier_ptb").presets
    added = from_trials(TRIALS, tmp_path / "archive", 1234, untuned, presets)
    added.update(from_trials(TRIALS.with_name("baseline.csv"), tmp_path / "archive", 1234, untuned, presets))
    assert added["tune_frontier_ptb"] == 160 and added["tune_frontier_ptb_untuned"] == 8
    search = Archive(tmp_path / "archive", "tune_frontier_ptb")
    job = ["experiment=tune_frontier_ptb", "preset=frontier/ptb/gru", "budget.flops=1e12", "tune.lr_scale=0.5",
           "tune.tokens_per_step=1024", "logger=csv"]
    entry = search.find(job_key(compose_raw(job, tmp_path)))
    row = next(r for r in _rows(TRIALS) if r["job"] == entry["job"].join(["tune_frontier_ptb/", ""]))
    assert (row["family"], float(row["lr_scale"]), row["tokens_per_step_grid"]) == ("gru", 0.5, "1024")
    assert entry["metrics"]["val/loss_best"] == float(row["val_loss_best"])
    recipe = compose_raw(["preset=frontier/ptb/gru", "budget.flops=1e12", *untuned], tmp_path)
    assert Archive(tmp_path / "archive", "tune_frontier_ptb_untuned").find(job_key(recipe)) is not None
    # archiving the same file again adds nothing: each key once
    assert from_trials(TRIALS, tmp_path / "archive", 1234, untuned, presets) == {}


def test_the_last_line_of_a_key_wins_and_a_torn_line_costs_only_itself(tmp_path):
    archive = Archive(tmp_path, "s")
    key = make_key("lstm", "m", 1e12, 1, 256, 1, {})
    archive.append(key, "0", {"val/loss_best": 5.0})
    with open(archive.path, "a") as f:
        f.write('{"job": "9"}\n{"key": {"family": "gru"')  # a line edited by hand; a process killed mid-line
    archive.append(key, "0", {"val/loss_best": 4.0})
    assert archive.find(key)["metrics"] == {"val/loss_best": 4.0}
    assert len(archive.entries()) == 1


def test_an_entry_archived_without_its_curve_is_given_the_curve_of_its_own_run_only(tmp_path):
    from seqbench.protocol.sweep_archive import add_curves

    sweep, archive = tmp_path / "s", Archive(tmp_path / "archive", "s")
    header = "step,val/ppl,val/loss,curve/tokens\n"
    for job, metrics, stored in [("0", {"val/loss_best": 5.0}, {"val/loss_best": 5.0}),   # its own run
                                 ("1", {"val/loss_best": 4.0}, {"val/loss_best": 4.5}),   # another run's folder
                                 ("2", {"val/loss_best": 3.0}, {"val/loss_best": 3.0, "restored_from": "x"})]:
        archive.append(make_key("lstm", "m", 1e12, 1, 256, int(job), {}), job, metrics)
        (sweep / job / "csv").mkdir(parents=True)
        (sweep / job / "metrics.json").write_text(json.dumps(stored))
        (sweep / job / "csv" / "metrics.csv").write_text(header + f"10,150.0,5.0,{job}000\n")
    with open(archive.path, "a") as f:
        f.write('{"job": "0"}\n')  # a line without metrics (edited by hand): skipped, kept
    assert add_curves(sweep, tmp_path / "archive") == 1
    assert {e["job"]: e.get("curve") for e in archive.entries().values()} == {
        "0": [{"step": 10.0, "val/ppl": 150.0, "val/loss": 5.0, "curve/tokens": 0.0, "curve/train_time_s": None,
               "curve/train_cpu_s": None, "curve/wall_time_s": None, "train/flops": None}], "1": None, "2": None}
    assert len(archive.path.read_text().splitlines()) == 4 and add_curves(sweep, tmp_path / "archive") == 0


def test_a_job_folder_is_refused_only_where_another_job_left_a_result_or_a_checkpoint(tmp_path):
    # bugs caught: a folder of another grid taken for the job (its result skipped as done, archived under
    # the new key, or resumed from); a folder a killed job left without a result, or an overrides.yaml
    # cut short, stopping every relaunch until a person moves it
    from hydra_plugins.seqbench_launcher.resumable_launcher import _check_same_job
    from seqbench.errors import ConfigError

    job = tmp_path / "7"
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "overrides.yaml").write_text("- seed=1\n")
    _check_same_job(job, ["seed=3"])  # nothing there to take for the job
    (job / "metrics.json").write_text('{"status": "completed"}')
    _check_same_job(job, ["seed=1", "logger=csv"])
    with pytest.raises(ConfigError, match="holds another job"):
        _check_same_job(job, ["seed=3"])
    (job / ".hydra" / "overrides.yaml").write_text("")
    _check_same_job(job, ["seed=3"])  # cut short: warned of, not refused


def _metrics(job):
    return json.loads((job / "metrics.json").read_text())


@pytest.mark.slow
@pytest.mark.corpus("ptb")
def test_a_sweep_whose_outputs_are_gone_is_restored_from_the_archive_and_only_new_jobs_train(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")  # outputs/sweeps is a link on the chains' machine
    sweep, archive = tmp_path / "link" / "sweep", tmp_path / "archive"
    args = ["-m", "hydra/launcher=resumable", f"hydra.sweep.dir={sweep}", f"hydra.launcher.archive={archive}",
            "model=lstm", "data=ptb", "logger=csv", "trainer=cpu", "trainer.max_steps=2", "trainer.max_epochs=-1",
            "trainer.val_check_interval=2",
            "trainer.limit_val_batches=1", "trainer.limit_test_batches=1", "trainer.num_sanity_val_steps=0",
            "~callbacks.model_summary", "~callbacks.progress_bar", "model.embedding_size=16", "model.hidden_size=16"]
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    first = run_cli([*args, "seed=1"], tmp_path, env=env)
    assert _metrics(sweep / "0").get("status") == "completed", first.stderr[-3000:]
    ran = {"0": _metrics(sweep / "0")}
    saved = {name: (sweep / "0" / ".hydra" / name).read_text() for name in ("config.yaml", "overrides.yaml")}
    output_dir = OmegaConf.load(sweep / "0" / ".hydra" / "hydra.yaml").hydra.runtime.output_dir
    assert {e["job"]: e["metrics"] for e in Archive(archive, "sweep").entries().values()} == ran

    from seqbench.training.record import read_curve, read_runs

    curve = read_curve(sweep / "0" / "csv" / "metrics.csv")
    assert len(curve) >= 1 and curve[-1]["curve/tokens"] > 0
    shutil.rmtree(sweep)  # a session stop: the outputs are gone, the committed archive is not
    # ... and a later attempt at job 0 was killed: its partial curve and checkpoint must not be read
    (sweep / "0" / "csv").mkdir(parents=True)
    (sweep / "0" / "csv" / "metrics.csv").write_text("step,val/ppl,val/loss\n1,99999.0,11.5\n")
    (sweep / "0" / "checkpoints").mkdir()
    (sweep / "0" / "checkpoints" / "last.ckpt").write_bytes(b"partial")
    second = run_cli([*args, "seed=1,2"], tmp_path, env=env)
    log = second.stdout + second.stderr
    assert "1 of them restored from" in log and "Launching 1 of 2 jobs" in log, log[-3000:]
    for job in ("0",):  # restored, not trained: no training log, the same numbers, curve and saved config
        assert not (sweep / job / "train.log").exists()
        restored = _metrics(sweep / job)
        assert restored.pop("restored_from") == str(archive / "sweep.jsonl")
        assert restored == ran[job]
        assert read_curve(sweep / job / "csv" / "metrics.csv") == curve
        assert not (sweep / job / "checkpoints").exists()
        assert {name: (sweep / job / ".hydra" / name).read_text() for name in saved} == saved  # recipe applied
        # Hydra's abspath: the link kept, as the run wrote it (a resolved path named another folder)
        assert OmegaConf.load(sweep / job / ".hydra" / "hydra.yaml").hydra.runtime.output_dir == output_dir
    assert _metrics(sweep / "1").get("status") == "completed", log[-3000:]
    assert (sweep / "1" / "train.log").is_file()
    assert len(Archive(archive, "sweep").entries()) == 2
    from seqbench.training.hydra_callbacks import last_outcomes

    assert {job: record["status"] for job, record in last_outcomes(sweep).items()} == {0: "completed", 1: "completed"}

    runs = read_runs([sweep])  # a restored job reads as one that ran there
    assert sorted(r.family for r in runs) == ["lstm"] * 2
    assert all(r.metrics["train/loss"] is not None and r.curve for r in runs)

    # the same folder relaunched with another grid: job 0 is now seed 3, and seed 1's results are not its
    third = run_cli([*args, "seed=3,1"], tmp_path, env=env)
    assert third.returncode != 0 and "holds another job" in third.stdout + third.stderr
    assert not (sweep / "2").exists() and len(Archive(archive, "sweep").entries()) == 2


def test_the_dry_run_counts_the_archived_jobs_of_a_sweep_not_yet_restored(tmp_path, capsys):
    # after a session stop --root is empty: "to run" alone would plan hours the archive already holds
    from seqbench.protocol.campaign import main

    archive = Archive(tmp_path / "archive", "tune_frontier_ptb")
    for seed in (1, 2):
        archive.append(make_key("lstm", "m", 1e12, 1, 256, seed, {}), str(seed), {"status": "completed"})
    assert main(["tune_frontier_ptb", "--dry-run", "--root", str(tmp_path / "root"), "--steps", "search",
                 "--archive", str(tmp_path / "archive")]) == 0
    assert "tune_frontier_ptb [to run; 2 job(s) in the archive, restored on launch]" in capsys.readouterr().out


def test_a_merge_adds_the_jobs_the_other_copy_holds_and_keeps_the_ones_both_hold(tmp_path):
    # bug caught: a merge that appends every line of the other copy, so a job both hold takes the other's
    # entry (the last line of a key wins) and a run a chain or report already read changes under it; or
    # one that skips a sweep this archive has no file for yet
    from seqbench.protocol.sweep_archive import main as archive_main

    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    key = lambda lr: make_key("lstm", "m", 1e13, lr, 256, 1234, {})  # noqa: E731
    Archive(mine, "s").append(key(1), "0", {"val/loss": 1.5, "device": "cpu"})
    Archive(theirs, "s").append(key(1), "0", {"val/loss": 1.4, "device": "cuda"})
    Archive(theirs, "s").append(key(2), "1", {"val/loss": 1.3, "device": "cuda"})
    Archive(theirs, "t").append(key(4), "0", {"val/loss": 1.2, "device": "cuda"})
    with open(theirs / "t.jsonl", "a") as f:
        f.write('{"key": {"torn')  # a line a killed process left: not copied
    assert archive_main(["merge", str(theirs), "--archive", str(mine)]) == 0
    entries = Archive(mine, "s").entries()
    assert [e["metrics"]["device"] for e in entries.values()] == ["cpu", "cuda"]
    assert Archive(mine, "s").find(key(2))["metrics"]["val/loss"] == 1.3
    assert [e["metrics"]["val/loss"] for e in Archive(mine, "t").entries().values()] == [1.2]
    assert archive_main(["merge", str(theirs), "--archive", str(mine)]) == 0  # again: nothing more
    assert len((mine / "s.jsonl").read_text().splitlines()) == 2


def test_a_sweep_restores_the_jobs_another_sweep_archived_when_it_names_it(tmp_path):
    # bug caught: a tier's own size sweep retrained the runs the first size sweep had already made at that
    # tier (same family, size, budget, setting and seed), because each sweep read only its own archive file
    archive = tmp_path / "archive"
    args = ["-m", "hydra/launcher=resumable", f"hydra.launcher.archive={archive}",
            "model=lstm", "data=ptb", "logger=csv", "trainer=cpu", "trainer.max_steps=2", "trainer.max_epochs=-1",
            "trainer.val_check_interval=2",
            "trainer.limit_val_batches=1", "trainer.limit_test_batches=1", "trainer.num_sanity_val_steps=0",
            "~callbacks.model_summary", "~callbacks.progress_bar", "model.embedding_size=16", "model.hidden_size=16"]
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    first = run_cli([*args, f"hydra.sweep.dir={tmp_path / 'first'}", "seed=1"], tmp_path, env=env)
    assert _metrics(tmp_path / "first" / "0").get("status") == "completed", first.stderr[-3000:]
    later = tmp_path / "later"
    second = run_cli([*args, f"hydra.sweep.dir={later}", "hydra.launcher.archive_from=[first]", "seed=2,1"],
                     tmp_path, env=env)
    log = second.stdout + second.stderr
    assert "Launching 1 of 2 jobs" in log, log[-3000:]
    restored = _metrics(later / "1")  # seed 1: the first sweep's run, not trained again
    assert restored.pop("restored_from") == str(archive / "first.jsonl")
    assert restored == _metrics(tmp_path / "first" / "0") and not (later / "1" / "train.log").exists()
    assert (later / "0" / "train.log").is_file()  # seed 2 was never run: it trains
    # without the name, the other sweep's archive is not read
    third = run_cli([*args, f"hydra.sweep.dir={tmp_path / 'third'}", "seed=1"], tmp_path, env=env)
    assert "Launching 1 of 1 jobs" in third.stdout + third.stderr
