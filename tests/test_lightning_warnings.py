"""Lightning's warnings that are false for a seqbench run (seqbench.lightning_warnings): silenced where
they are false, kept where they are not, and still matching what the installed Lightning prints."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import lightning
import pytest

from conftest import TINY, TINY_RNN, compose_cfg
from seqbench import lightning_warnings as lw
from seqbench.run import train

# what Lightning prints, in full, for each message (its paths and directories as a run fills them in)
PRINTED = {
    lw.NOT_RESUMABLE: "You're resuming from a checkpoint that ended before the epoch ended and your dataloader is"
                      " not resumable. This can cause unreliable results if further training is done.",
    lw.ITERABLE_LEN: "Your `IterableDataset` has `__len__` defined. In combination with multi-process data loading"
                     " (when num_workers > 1), `__len__` could be inaccurate",
    lw.CHECKPOINT_DIR: "Checkpoint directory /runs/7/checkpoints exists and is not empty.",
    lw.LOGS_DIR: "Experiment logs directory /runs/7/csv/ exists and is not empty. Previous log files in this"
                 " directory will be deleted when the new ones are saved!",
    lw.LEAF_SPEC: "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec) and"
                  " treespec.is_leaf()` instead.",
}


def _through(datamodule, resumes_own_run: bool) -> set[str]:
    """The messages of PRINTED that reach the user inside the silencing block."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with lw.false_warnings_silenced(datamodule, resumes_own_run):
            for key, text in PRINTED.items():
                warnings.warn(text, UserWarning)
    return {key for key, text in PRINTED.items() if any(str(w.message) == text for w in caught)}


def test_every_silenced_message_is_one_the_installed_lightning_prints():
    """A reworded Lightning message would slip past its filter unseen: each must still be in Lightning's
    source (its f-string fields such as `{dirpath}` stand for the pattern's `.*`), torch's for LEAF_SPEC."""
    import torch

    sources = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                        for root in (Path(lightning.__file__).parent, Path(torch.__file__).parent / "utils")
                        for p in root.rglob("*.py"))
    sources = re.sub(r'"\s*\n\s*f?"', "", sources)  # implicit concatenation of string literals across lines
    for key in PRINTED:
        regex = key if ".*" in key else re.escape(key)
        assert re.search(regex, sources), f"Lightning no longer prints {key!r}: update seqbench.lightning_warnings"
        assert any(re.match(p, PRINTED[key]) for p in lw.false_here(_LM(), True)), key


class _LM:
    """A data module that keeps its place (its own state_dict/load_state_dict) and loads in process."""
    load_state_dict = lambda self, state: None  # noqa: E731


class _Workers(lightning.LightningDataModule):
    """A data module with worker processes and no place of its own."""
    num_workers = 2


def test_a_false_warning_is_silenced_only_where_it_is_false():
    from seqbench.data.lm import LanguageModelDataModule
    from seqbench.data.mnist import MNISTDataModule
    from seqbench.data.synthetic import ProbeDataModule

    assert lw.keeps_its_place(LanguageModelDataModule.__new__(LanguageModelDataModule))
    assert lw.keeps_its_place(ProbeDataModule.__new__(ProbeDataModule))
    assert not lw.keeps_its_place(MNISTDataModule.__new__(MNISTDataModule))
    assert _through(_LM(), resumes_own_run=True) == set()
    assert _through(_LM(), resumes_own_run=False) == {lw.CHECKPOINT_DIR, lw.LOGS_DIR}  # a new run's full folder
    assert _through(_Workers(), resumes_own_run=True) == {lw.NOT_RESUMABLE, lw.ITERABLE_LEN}
    # the block restores the filters: outside it every message comes through again
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn(PRINTED[lw.LEAF_SPEC], UserWarning)
    assert len(caught) == 1


@pytest.mark.slow
def test_a_run_resumed_in_its_own_directory_shows_none_of_the_false_warnings(tmp_path):
    """The resumable launcher's case: the job is started again in its folder and finds its `last.ckpt`.
    Lightning would warn four times that something is wrong (a loader not resumable, an iterable's length,
    a full checkpoint folder, log files to be deleted); none of it is true here, and none is printed."""
    args = TINY + TINY_RNN + ["trainer.limit_train_batches=null", "data.batch_size=4", "data.bptt=8", "test=false",
                              "callbacks.step_checkpoint.every_n_train_steps=4", "~callbacks.best_checkpoint"]
    train(compose_cfg(args + ["trainer.max_steps=4"], tmp_path), tmp_path)
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = train(compose_cfg(args + ["trainer.max_steps=8"], tmp_path), tmp_path)
    assert metrics["status"] == "completed"
    printed = [str(w.message) for w in caught]
    false = [m for m in printed if any(re.match(key if ".*" in key else re.escape(key), m) for key in PRINTED)]
    assert not false, false
    rows = (tmp_path / "csv" / "metrics.csv").read_text().splitlines()
    assert len(rows) > 1  # the history the warning said would be deleted is there
