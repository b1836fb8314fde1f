"""Loss along the evaluation text (seqbench.analysis.loss_by_position): every evaluated token read once, in
the order of the text, after the end of the training text; checked against the ordinary evaluation and by hand."""

from __future__ import annotations

import csv
import math

import lightning as L
import pytest
import torch
from omegaconf import OmegaConf

from conftest import TINY
from seqbench.analysis import context_usage as cu
from seqbench.analysis import loss_by_position as lbp
from seqbench.families import FAMILIES
from seqbench.training.run import build


def test_the_evaluation_text_is_the_train_tail_then_valid_then_test():
    # bugs caught: the tail cut from the wrong end of train, test left out, valid read twice where it is test
    streams = {"train": torch.arange(100), "valid": torch.arange(100, 110), "test": torch.arange(110, 125)}
    stream, positions, split_at = lbp.evaluation_text(streams, warm=8)
    assert stream[: 8].tolist() == list(range(92, 100))
    assert stream[positions].tolist() == list(range(100, 125)) and split_at == 10
    same = {**streams, "test": streams["valid"]}  # Tiny Shakespeare without heldout_score: valid is test
    stream, positions, split_at = lbp.evaluation_text(same, warm=500)  # warm beyond train: all of it
    assert stream[positions].tolist() == list(range(100, 110)) and stream[0].item() == 0 and split_at == 10
    stream, positions, split_at = lbp.evaluation_text(streams, warm=0)  # no context for valid's first token
    assert stream[positions].tolist() == list(range(101, 125)) and split_at == 9


def test_a_mark_is_found_at_the_token_where_it_begins():
    # bug caught: the character offset returned instead of the token's index (words decode to several)
    pieces = ["the ", "cat ", "PROS", "PERO: ", "hi"]
    assert lbp.first_mark(pieces, "PROSPERO:") == 2 and lbp.first_mark(pieces, "cat") == 1
    assert lbp.first_mark(pieces, "ARIEL") is None


def test_stretches_are_cut_at_the_start_of_test_and_at_each_mark_and_named_by_the_last_mark():
    # bugs caught: a stretch that runs across the start of test, a stretch named after the next mark rather
    # than the last one, a mark the text lacks cutting at 0 or failing
    losses = torch.arange(10.0)  # valid 0..5, test 6..9
    got = lbp.stretches(losses, 6, {"A": 2, "B": 8, "C": None})
    assert got == {"valid, before the marks": 0.5, "valid, from `A`": 3.5, "test, from `A`": 6.5,
                   "test, from `B`": 8.5}
    assert lbp.stretches(losses, 10, {}) == {"valid, before the marks": 4.5}  # no test: valid read once


def test_passes_are_the_tokens_trained_over_the_training_split():
    # bug caught: the tokens divided by the evaluation text's length, or a run without the record failing
    class Run:
        metrics = {"curve/tokens": 5000.0}
        datamodule = type("DM", (), {"streams": {"train": torch.zeros(1000, dtype=torch.long),
                                                 "valid": torch.zeros(100, dtype=torch.long)}})()
    assert lbp.passes(Run()) == 5.0
    Run.metrics = {}
    assert lbp.passes(Run()) is None


def test_each_family_budget_and_size_is_the_mean_over_its_seeds_and_no_more():
    # bugs caught: the runs of two budgets (1e13 and 1e14) pooled as seeds of one family, so ten times the
    # compute vanishes from the table; a stretch's mean taken over one run only
    def row(family, budget, seed, test, unseen, passes=8.0, params=100):
        return {"family": family, "budget": budget, "seed": seed, "params_non_embedding": params, "passes": passes,
                "test": test, "stretches": {"test, from `B`": unseen}}

    text = lbp.by_cell([row("gru", 1e13, 2, 1.5, 1.6), row("gru", 1e13, 3, 1.7, 1.8),
                        row("gru", 1e14, 1234, 1.6, 2.0, passes=80.0)])
    lines = [line for line in text.splitlines() if line.startswith("| gru")]
    assert lines == ["| gru | 1e+13 | 100 | 2 (2, 3) | 8.0 | 1.600 | 1.700 |",
                     "| gru | 1e+14 | 100 | 1 (1234) | 80.0 | 1.600 | 2.000 |"], lines


def test_a_cell_s_seed_sd_is_over_its_runs_and_absent_with_one_run(tmp_path):
    # bugs caught: the sd taken over the cell's stretches (or over every run of the family) instead of its
    # seeds; a one-run cell given an sd of 0 (it has none: the findings' one-sd rule would read it as exact);
    # the CSV the findings read written from other numbers than the tables'
    def row(budget, seed, seen, unseen):
        return {"family": "gru", "budget": budget, "seed": seed, "params_non_embedding": 100, "passes": 1.0,
                "test": 1.0, "stretches": {"test, from `A`": seen, "test, from `B`": unseen}}

    rows = [row(1e13, 2, 1.5, 1.6), row(1e13, 3, 1.7, 2.0), row(1e14, 2, 1.4, 2.1)]
    low, high = lbp.cell_rows(rows)
    assert (low["runs"], low["seeds"], high["runs"]) == (2, "2 3", 1)
    assert math.isclose(low["sd: test, from `A`"], 0.2 / 2 ** 0.5)  # two runs: sd = |difference| / √2
    assert math.isclose(low["sd: test, from `B`"], 0.4 / 2 ** 0.5) and high["sd: test, from `B`"] is None
    lbp.write_cells(tmp_path / "cells.csv", rows)
    saved = list(csv.DictReader(open(tmp_path / "cells.csv")))
    assert [(float(c["budget"]), c["runs"], float(c["test, from `B`"])) for c in saved] == [(1e13, "2", 1.8),
                                                                                            (1e14, "1", 2.1)]
    assert math.isclose(float(saved[0]["sd: test, from `B`"]), 0.4 / 2 ** 0.5) and saved[1]["sd: test, from `B`"] == ""


def test_the_next_budget_s_change_is_after_minus_before_in_budget_order_at_one_size():
    # bugs caught: the change's sign reversed (a worse unseen play read as better); the budgets taken in the
    # order the runs were given (1e14 first: the change from 1e14 to 1e13); two sizes' runs compared
    def row(family, budget, test, unseen, params=100):
        return {"family": family, "budget": budget, "seed": 1, "params_non_embedding": params, "passes": 1.0,
                "test": test, "stretches": {"test, from `B`": unseen}}

    rows = [row("gru", 1e14, 1.6, 2.0), row("gru", 1e13, 1.5, 1.6), row("gru", 1e13, 1.7, 1.8),
            row("lstm", 1e13, 1.5, 1.6, params=50), row("lstm", 1e14, 1.4, 1.5, params=70), row("rnn", 1e13, 1.5, 1.6)]
    lines = [line for line in lbp.compute_changes(rows).splitlines()[2:]]
    assert lines == ["| gru | 100 | 1e+13 → 1e+14 | 2 → 1 | +0.000 | +0.300 |"], lines


def test_bins_are_contiguous_means_in_order():
    assert lbp.binned(torch.tensor([1.0, 3.0, 5.0, 7.0, 9.0]), 2) == [3.0, 8.0]  # 3 and 2 tokens


@pytest.fixture
def corpus(tmp_path):
    """Three splits of made-up text, in characters."""
    lines = "\n".join(" ".join(["the cat sat on a mat", "and a dog ran off"][i % 2].split()[: 3 + i % 4])
                      for i in range(40))
    files = {}
    for split, text in (("train", lines), ("valid", lines[:300]), ("test", lines[300:700])):
        files[split] = tmp_path / f"{split}.txt"
        files[split].write_text(text + "\n")
    return ["data=text", f"data.train_file={files['train']}", f"data.valid_file={files['valid']}",
            f"data.test_file={files['test']}", "data.level=char", "data.eval_batch_size=1"]


@pytest.mark.parametrize("family", ["lstm", "mingru"])
def test_every_token_in_one_pass_is_the_context_usage_reading_one_target_at_a_time(family, corpus, cfg_factory):
    # bug caught: the pass's losses shifted by one token, or the state dropped between chunks
    torch.manual_seed(0)
    dm, model = build(cfg_factory([*TINY, f"model={family}", *FAMILIES[family].tiny, *corpus], tiny=False))
    model.eval()
    stream = dm.streams["valid"]
    reference = cu.full_context_losses(model, stream, torch.arange(5, stream.numel()))
    assert torch.allclose(lbp.every_token_losses(model, stream, 5, chunk=7), reference, atol=1e-5)


def test_a_recurrent_model_s_valid_mean_is_its_ordinary_validation_loss_with_the_train_tail_as_context(
        corpus, cfg_factory, tmp_path):
    # bug caught: positions one off (each loss the next token's), or the state not carried through the text
    torch.manual_seed(0)
    cfg = cfg_factory(["model=lstm", *corpus])
    dm, model = build(cfg)
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, run / ".hydra" / "config.yaml")
    (run / "checkpoints").mkdir()
    torch.save({"state_dict": model.state_dict()}, run / "checkpoints" / "last.ckpt")
    (row,) = lbp.main([str(run), "--out", str(tmp_path / "out"), "--bins", "4", "--warm", "0"])
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu")
    ordinary = trainer.validate(model.eval(), datamodule=dm, verbose=False)[0]["val/loss"]
    # warm 0: valid's first token has no context to be predicted from, the ordinary evaluation's neither
    assert math.isclose(row["valid"], ordinary, rel_tol=1e-4), (row["valid"], ordinary)
    assert row["tokens"] == dm.streams["valid"].numel() + dm.streams["test"].numel() - 1
    saved = list(csv.DictReader(open(tmp_path / "out" / "loss_by_position.csv")))
    assert [float(saved[0][f"bin_{i}"]) for i in range(1, 5)] == row["bins"]
    assert (tmp_path / "out" / "record.json").is_file()
    lbp.main([str(run), "--out", str(tmp_path / "out"), "--bins", "4", "--warm", "0", "--mark", "dog"])
    where = (tmp_path / "out" / "loss_by_position.md").read_text()
    text = dm.tokenizer.decode(dm.streams["valid"]) + dm.tokenizer.decode(dm.streams["test"])
    first = text.index("dog") - 1  # warm 0: the first evaluated token is valid's second
    assert f"| `dog` | {first:,} |" in where, where
    # the stretches recombine to each split's mean: valid before and from `dog`, then test from `dog`
    split_at = dm.streams["valid"].numel() - 1
    (saved,) = list(csv.DictReader(open(tmp_path / "out" / "loss_by_position.csv")))
    before, after = float(saved["valid, before the marks"]), float(saved["valid, from `dog`"])
    assert math.isclose((before * first + after * (split_at - first)) / split_at, float(saved["valid"]), rel_tol=1e-5)
    assert math.isclose(float(saved["test, from `dog`"]), float(saved["test"]), rel_tol=1e-6)
    assert "## The loss in each stretch of the text" in where
    (cell,) = list(csv.DictReader(open(tmp_path / "out" / "cells.csv")))  # one run: its cell is the run
    assert (cell["runs"], cell["sd: test, from `dog`"]) == ("1", "")
    assert float(cell["test, from `dog`"]) == float(saved["test, from `dog`"])
