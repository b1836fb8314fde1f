"""The start of a run, as a user sees it: the config as a tree (on a terminal, and in the run
directory), each log line once, a model summary without a column of zero FLOPs, no W&B warning."""

from __future__ import annotations

from omegaconf import OmegaConf

from conftest import run_cli
from seqbench.training.console import show_config


def test_a_run_starts_with_its_config_and_says_each_thing_once(tmp_path):
    out = run_cli(["model=lstm", "data=ptb", "model.hidden_size=16", "model.embedding_size=16", "trainer=cpu",
                   "trainer.max_steps=2", "trainer.limit_val_batches=1", "trainer.val_check_interval=2",
                   "test=false", "logger=wandb", f"hydra.run.dir={tmp_path / 'run'}"], tmp_path,
                  env={"WANDB_MODE": "offline", "WANDB_SILENT": "false"})
    assert out.returncode == 0, out.stderr[-3000:]
    printed = out.stdout + out.stderr
    tree = (tmp_path / "run" / "config_tree.log").read_text()
    assert tree.startswith("CONFIG") and "hidden_size: 16" in tree and "max_steps: 2" in tree
    assert "\x1b[" not in tree  # plain text in the file, colours only on a terminal
    assert printed.count("Seed set to 1234") == 1, printed[:3000]
    assert printed.count("GPU available") == 1
    assert "Seed set to 1234" in (tmp_path / "run" / "train.log").read_text()  # Lightning's lines in the log file
    assert "Total FLOPs" not in printed and "Training FLOPs per token" in printed
    assert "anonymous" not in printed


def test_the_config_tree_is_printed_on_a_terminal(tmp_path, capsys):
    cfg = OmegaConf.create({"seed": 1, "model": {"hidden_size": 16}, "data": {"batch_size": 4}, "hydra": {"x": 1}})
    show_config(cfg, tmp_path, terminal=True)
    shown = capsys.readouterr().out
    assert shown.index("data") < shown.index("model") < shown.index("seed")  # the groups a user changes first
    assert "hidden_size: 16" in shown and "hydra" not in shown
    show_config(cfg, tmp_path, terminal=False)
    assert capsys.readouterr().out == "" and "batch_size: 4" in (tmp_path / "config_tree.log").read_text()


def test_lightnings_lines_reach_the_log_file_when_it_was_imported_before_logging_was_set_up():
    """Lightning imported before any root handler keeps its lines to itself (its own console handler,
    propagate=False): a run started from such a process wrote no Lightning line to train.log."""
    import logging

    from seqbench.training.console import log_once

    names = ("lightning", "lightning.pytorch", "lightning.fabric")
    saved = {n: (logging.getLogger(n).handlers[:], logging.getLogger(n).propagate) for n in names}
    root = logging.getLogger()
    records: list[logging.LogRecord] = []
    catcher = logging.Handler()
    catcher.emit = records.append
    try:
        for name in ("lightning.pytorch", "lightning.fabric"):  # as their import leaves them without a root handler
            logging.getLogger(name).addHandler(logging.StreamHandler())
            logging.getLogger(name).propagate = False
        root.addHandler(catcher)  # Hydra's logging, set up after
        log_once()
        logging.getLogger("lightning.fabric.utilities.seed").warning("Seed set to 1")
        logging.getLogger("lightning.pytorch.trainer").warning("GPU available: False")
        assert [r.getMessage() for r in records] == ["Seed set to 1", "GPU available: False"]
        assert not any(logging.getLogger(n).handlers for n in names)  # and printed once, by the root's handler
    finally:
        root.removeHandler(catcher)
        for name, (handlers, propagate) in saved.items():
            logging.getLogger(name).handlers[:] = handlers
            logging.getLogger(name).propagate = propagate


def test_lightnings_lines_that_say_nothing_about_the_run_are_dropped_and_the_others_kept():
    """The "💡 Tip:" advertisements (litlogger, litmodels) and the note that seqbench's model summary replaced
    Lightning's come with every fit; the device line must stay. Each dropped line must still be one the
    installed Lightning prints (a reworded one would slip through unseen)."""
    import logging
    from pathlib import Path

    import lightning

    from seqbench.training.console import LIGHTNING_INFO, NOT_ABOUT_THE_RUN, _NotAboutTheRun, log_once

    source = "\n".join(p.read_text(encoding="utf-8") for p in Path(lightning.__file__).parent.rglob("*.py"))
    for start in NOT_ABOUT_THE_RUN:
        assert f'"{start}' in source, f"Lightning no longer prints {start!r}: update seqbench.training.console"
    logger = logging.getLogger(LIGHTNING_INFO)
    saved = logger.filters[:]
    logger.filters[:] = [f for f in saved if not isinstance(f, _NotAboutTheRun)]  # as in a fresh process
    records: list[logging.LogRecord] = []
    catcher = logging.Handler()
    catcher.emit = records.append
    logger.addHandler(catcher)
    try:
        log_once()
        log_once()  # twice: one filter
        logger.warning("💡 Tip: For seamless cloud logging and experiment tracking, try installing litlogger")
        logger.warning("💡 Tip: For seamless cloud uploads and versioning, try installing litmodels")
        logger.warning("Trainer already configured with model summary callbacks: [ModelSummary]. Skipping")
        logger.warning("GPU available: False, used: False")
        assert [r.getMessage() for r in records] == ["GPU available: False, used: False"]
        assert sum(isinstance(f, _NotAboutTheRun) for f in logger.filters) == 1
    finally:
        logger.removeHandler(catcher)
        logger.filters[:] = saved
