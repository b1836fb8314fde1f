"""Lightning's warnings that are false for a seqbench run (seqbench.training.lightning_warnings): silenced where
they are false, kept where they are not, undone when the run ends, and still matching what the installed
Lightning prints."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import lightning
import pytest

from conftest import TINY, TINY_RNN, compose_cfg
from seqbench.training import lightning_warnings as lw
from seqbench.training.run import train

RUN = "/runs/7"
# what Lightning prints, in full, for each message, as a run at RUN resuming from its last.ckpt fills them in
PRINTED = {
    lw.NOT_RESUMABLE: "You're resuming from a checkpoint that ended before the epoch ended and your dataloader is"
                      " not resumable. This can cause unreliable results if further training is done.",
    lw.ITERABLE_LEN: "Your `IterableDataset` has `__len__` defined. In combination with multi-process data loading"
                     " (when num_workers > 1), `__len__` could be inaccurate",
    lw.CHECKPOINT_DIR: f"Checkpoint directory {RUN}/checkpoints exists and is not empty.",
    lw.LOGS_DIR: f"Experiment logs directory {RUN}/csv/ exists and is not empty. Previous log files in this"
                 " directory will be deleted when the new ones are saved!",
    lw.LEAF_SPEC: "`isinstance(treespec, LeafSpec)` is deprecated, use `isinstance(treespec, TreeSpec) and"
                  " treespec.is_leaf()` instead.",
}
RESUMED = dict(kept_logs=[f"{RUN}/csv/"], resumed_from=f"{RUN}/checkpoints/last.ckpt")


def _through(datamodule, module: str = "lightning.pytorch.trainer", **resume) -> set[str]:
    """The messages of PRINTED that reach the user inside the silencing block, raised from `module`."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with lw.false_warnings_silenced(datamodule, **resume):
            for key, text in PRINTED.items():
                warnings.warn_explicit(text, UserWarning, "x.py", 1, module=module)
    return {key for key, text in PRINTED.items() if any(str(w.message) == text for w in caught)}


def _as_regex(key: str) -> str:
    """A message as it stands in Lightning's source: a `{}` field is an f-string's `{...}`."""
    return r"\{[^}]*\}".join(re.escape(part) for part in key.split("{}"))


def test_every_silenced_message_is_one_the_installed_lightning_prints():
    """A reworded Lightning message would slip past its filter unseen: each must still be in Lightning's
    source (torch's for LEAF_SPEC), and each filter must match the message as printed."""
    import torch

    sources = "\n".join(p.read_text(encoding="utf-8", errors="replace")
                        for root in (Path(lightning.__file__).parent, Path(torch.__file__).parent / "utils")
                        for p in root.rglob("*.py"))
    sources = re.sub(r'"\s*\n\s*f?"', "", sources)  # implicit concatenation of string literals across lines
    for key in PRINTED:
        assert re.search(_as_regex(key), sources), f"Lightning no longer prints {key!r}: update seqbench.training.lightning_warnings"
        assert any(re.match(p, PRINTED[key]) for p, _ in lw.false_here(_LM(), **RESUMED)), key


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
    from seqbench.data.translation import TranslationDataModule

    assert lw.keeps_its_place(LanguageModelDataModule.__new__(LanguageModelDataModule))
    assert lw.keeps_its_place(ProbeDataModule.__new__(ProbeDataModule))
    assert lw.keeps_its_place(TranslationDataModule.__new__(TranslationDataModule))
    assert not lw.keeps_its_place(MNISTDataModule.__new__(MNISTDataModule))
    assert _through(_LM(), **RESUMED) == set()
    assert _through(_LM()) == {lw.CHECKPOINT_DIR, lw.LOGS_DIR}  # a new run's full folders: true there
    # a resume whose logs are not kept (Lightning's own CSVLogger, or one writing elsewhere) deletes them
    assert _through(_LM(), resumed_from=RESUMED["resumed_from"]) == {lw.LOGS_DIR}
    # another run's folders
    assert _through(_LM(), kept_logs=["/runs/8/csv/"], resumed_from="/runs/8/checkpoints/last.ckpt") == {
        lw.CHECKPOINT_DIR, lw.LOGS_DIR}
    assert _through(_Workers(), **RESUMED) == {lw.NOT_RESUMABLE, lw.ITERABLE_LEN}
    # torch's deprecation raised from anything but Lightning's code is not Lightning's to answer for
    assert _through(_LM(), module="seqbench.nn.scan", **RESUMED) == {lw.LEAF_SPEC}


def test_the_filters_end_with_the_run_whether_it_completes_or_fails(tmp_path, monkeypatch):
    """A filter left behind would hide these warnings from the next job of a multirun in the same process,
    or from the tests that follow."""
    before = warnings.filters[:]
    args = TINY + TINY_RNN + ["model=lstm", "data=ptb", "test=false"]
    train(compose_cfg(args, tmp_path / "a"), tmp_path / "a")
    assert warnings.filters == before

    def fails(*a, **k):
        raise RuntimeError("planted")

    monkeypatch.setattr(lightning.Trainer, "fit", fails)
    with pytest.raises(RuntimeError, match="planted"):
        train(compose_cfg(args, tmp_path / "b"), tmp_path / "b")
    assert warnings.filters == before


@pytest.mark.slow
def test_a_run_resumed_in_its_own_directory_shows_none_of_the_false_warnings(tmp_path):
    """The resumable launcher's case: the job is started again in its folder and finds its `last.ckpt`.
    Lightning would warn that a loader is not resumable, that an iterable has a length, and that the log
    files will be deleted; none of it is true here, and none is printed."""
    args = TINY + TINY_RNN + ["trainer.limit_train_batches=null", "data.batch_size=4", "data.bptt=8", "test=false",
                              "callbacks.step_checkpoint.every_n_train_steps=4", "~callbacks.best_checkpoint"]
    train(compose_cfg(args + ["trainer.max_steps=4"], tmp_path), tmp_path)
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = train(compose_cfg(args + ["trainer.max_steps=8"], tmp_path), tmp_path)
    assert metrics["status"] == "completed"
    printed = [str(w.message) for w in caught]
    false = [m for m in printed if any(re.match(_as_regex(key).replace(r"\{[^}]*\}", ".*"), m) for key in PRINTED)]
    assert not false, false
    rows = (tmp_path / "csv" / "metrics.csv").read_text().splitlines()
    assert len(rows) > 1  # the history the warning said would be deleted is there
