"""A run directory recorded before issue 34 (`+family=shakespeare/gru`: its `.hydra/hydra.yaml` says
`family: shakespeare/gru` among the choices, where new runs say `preset:`) still evaluates with
`src/eval.py` and is still read as a GRU run by the report, the dashboard and the run's identity.

tests/fixtures/run_before_issue34/ was trained on main at 408dc33 (the commit before the move) with
`python src/train.py +family=shakespeare/gru debug=fast model.hidden_size=8 model.embedding_size=8
logger=csv trainer.limit_{train,val,test}_batches=2`; its `.hydra/`, `metrics.json` and the checkpoint it
tested are kept.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from conftest import FIXTURES, compose_cfg, run_cli

from seqbench.errors import ConfigError
from seqbench.identity import preset_of
from seqbench.training.record import label_of

OLD_RUN = FIXTURES / "run_before_issue34"


def test_the_fixture_is_a_run_from_before_the_move():
    choices = yaml.safe_load((OLD_RUN / ".hydra" / "hydra.yaml").read_text())["hydra"]["runtime"]["choices"]
    assert choices.get("family") == "shakespeare/gru" and "preset" not in choices


@pytest.mark.corpus("tiny_shakespeare")
def test_a_run_recorded_before_the_move_evaluates_to_its_recorded_test_loss(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(OLD_RUN, run)
    out = run_cli([f"ckpt_path={run / 'checkpoints' / 'best-epoch000.ckpt'}", "split=test", "trainer.limit_test_batches=2",
                   f"hydra.run.dir={tmp_path / 'eval'}"], tmp_path, script="eval.py")
    assert out.returncode == 0, out.stderr[-2000:]
    recorded = json.loads((run / "metrics.json").read_text())
    evaluated = json.loads((tmp_path / "eval" / "eval_metrics.json").read_text())
    assert evaluated["test/loss"] == pytest.approx(recorded["test/loss"], rel=1e-5)


@pytest.mark.parametrize("group", ["family", "preset"])
def test_old_and_new_runs_are_read_as_their_preset(group, tmp_path):
    """The report groups a run by its preset's name whichever layout recorded it."""
    hydra_yaml = yaml.safe_load((OLD_RUN / ".hydra" / "hydra.yaml").read_text())
    choices = hydra_yaml["hydra"]["runtime"]["choices"]
    choices[group] = choices.pop("family")
    choices["model"] = "lstm"  # the GRU preset chooses model=lstm and sets the cell: the preset names it
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(hydra_yaml))
    assert preset_of(choices) == "shakespeare/gru"
    assert label_of(tmp_path) == "gru"


def test_an_old_command_says_how_it_is_written_now(tmp_path):
    """Without a `family` group, Hydra reads `+family=ptb/gru` as a new key and would train the default
    LSTM on PTB: the old command stops with the new spelling instead."""
    with pytest.raises(ConfigError, match="preset=ptb/gru"):
        compose_cfg(["+family=ptb/gru", "logger=csv"], tmp_path)
    out = run_cli(["+family=ptb/gru", "debug=fast", "logger=csv"], tmp_path)
    assert out.returncode == 1 and "+family=ptb/gru is written preset=ptb/gru" in out.stderr, out.stderr[-2000:]
    assert "Traceback" not in out.stderr


def test_an_old_runs_saved_config_names_modules_that_moved_and_reads_at_their_new_paths():
    """Issue 68 moved the loggers and Hydra's callbacks into seqbench.training; a saved config names them by their
    old paths, and `src/eval.py` instantiates the run's W&B logger from it (`seqbench.training.evaluate`)."""
    # bugs caught: a moved module left out of MOVED_TARGETS (an old W&B run no longer evaluates); a target
    # rewritten that did not move
    from hydra.utils import get_object
    from omegaconf import OmegaConf

    from seqbench.training.record import with_moved_targets

    saved = OmegaConf.load(OLD_RUN / ".hydra" / "config.yaml")
    saved.logger.wandb = {"_target_": "seqbench.loggers.wandb_logger", "project": "seqbench"}  # as a W&B run saved it
    old = [t for t in (OmegaConf.select(saved, k) for k in ("logger.csv._target_", "logger.wandb._target_")) if t]
    assert old == ["seqbench.csv_logger.CSVLogger", "seqbench.loggers.wandb_logger"]
    cfg = with_moved_targets(saved)
    assert cfg.logger.csv._target_ == "seqbench.training.csv_logger.CSVLogger"
    assert cfg.logger.wandb._target_ == "seqbench.training.loggers.wandb_logger"
    assert cfg.model._target_ == saved.model._target_ == "seqbench.models.recurrent.RecurrentModel"

    def targets(node):
        for key, value in node.items():
            if key == "_target_":
                yield value
            elif isinstance(value, dict):
                yield from targets(value)

    for target in targets(OmegaConf.to_container(cfg, resolve=False)):
        get_object(target)  # every class or function the old run names imports where it now lives
