"""A W&B run reads as a dashboard: best values in the summary, panel keys in the config, a table of
samples at every validation, checkpoints as artifacts — read back from the offline run file.

The tasks' sample tables are checked one by one on the first validation batch of each task (the
batch the callback hands them), without a W&B run.
"""

from __future__ import annotations

import csv
import json

import pytest
import torch
import wandb
import yaml

from conftest import TINY, TINY_RNN, compose_cfg
from seqbench.callbacks.validation_samples import _cell
from seqbench.training.run import build, train
from wandb_offline import OfflineRun

WANDB = [a for a in TINY if not a.startswith("logger")] + ["logger=wandb"]


def _csv_column(run_dir, name: str) -> list[float]:
    with open(run_dir / "csv" / "metrics.csv") as f:
        return [float(row[name]) for row in csv.DictReader(f) if row.get(name)]


@pytest.mark.corpus("ptb")
def test_offline_run_holds_best_values_panel_keys_samples_and_checkpoints(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb-data"))  # staged artifact copies stay in tmp
    cfg = compose_cfg(WANDB + TINY_RNN + ["preset=ptb/gru", "trainer.max_epochs=3", "logger.wandb.log_model=true",
                                          "callbacks.validation_samples.rows=5"], tmp_path)
    metrics = train(cfg, tmp_path)
    assert metrics["status"] == "completed"
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    run = OfflineRun.read(run_dir)

    # summary: best and last validation values, and the tested checkpoint's numbers
    ppl, loss = _csv_column(tmp_path, "val/ppl"), _csv_column(tmp_path, "val/loss")
    assert len(ppl) == 3
    assert run.summary["val/ppl"] == pytest.approx({"min": min(ppl), "last": ppl[-1]})
    assert run.summary["val/loss"] == pytest.approx({"min": min(loss), "last": loss[-1]})
    assert run.summary["test/ppl"] == pytest.approx(metrics["test/ppl"])
    assert run.summary["val/loss_best"] == pytest.approx(min(loss))
    assert run.summary["tested_checkpoint"] == metrics["tested_checkpoint"]

    # config: what a parallel-coordinates or scatter panel is drawn from
    expected = {"family": "gru", "architecture": "gru", "preset": "ptb/gru", "recipe": "lm/gru", "corpus": "ptb",
                "task": "lm", "params": metrics["params"], "params_non_embedding": metrics["params_non_embedding"],
                "train_flops": metrics["train/flops"]}
    assert {k: run.config.get(k, "missing") for k in expected} == expected
    # LearningCurve's count, also in metrics.json: 3 epochs x 4 batches of 20 x 35 target tokens, each
    # costing 3 x (2 GRU layers of 2·3·16·(16 + 16) + the 16 x 10,000 output projection) (TINY_RNN sizes)
    tokens = 3 * 4 * 20 * 35
    assert metrics["curve/tokens"] == tokens
    assert metrics["train/flops"] == tokens * 3 * (2 * (2 * 3 * 16 * (16 + 16)) + 2 * 16 * 10_000)

    # who the run is: named and tagged by the family the preset builds (model=lstm with cell gru), a training job
    assert (run.name, run.job_type, run.tags) == ("gru-ptb", "train", ["gru", "ptb", "ptb/gru"])
    assert (metrics["wandb_name"], metrics["wandb_group"]) == ("gru-ptb", "")  # for src/eval.py
    # the hyperparameters once: the composed config, nested, beside the panel keys; no model's init args
    composed = {k for k in cfg if k != "hydra"}
    assert set(run.config) - {"_wandb", "train_flops"} == composed | set(expected) - {"train_flops"}
    assert run.config["model"]["hidden_size"] == cfg.model.hidden_size and "hidden_size" not in run.config
    saved = yaml.safe_load((tmp_path / "csv" / "hparams.yaml").read_text())  # the CSV logger's copy
    assert set(saved) == set(run.config) - {"_wandb", "train_flops"} and saved["model"] == run.config["model"]

    # a samples table at each validation: the same 5 prompts, greedy continuations
    logged = [row["val/samples"] for row in run.history if "val/samples" in row]
    tables = [run.table(t) for t in logged]
    assert [t["nrows"] for t in logged] == [5, 5, 5]
    assert all(t["columns"] == ["epoch", "prompt", "continuation"] for t in tables)
    assert [[r[0] for r in t["data"]] for t in tables] == [[0] * 5, [1] * 5, [2] * 5]
    prompts = [[r[1] for r in t["data"]] for t in tables]
    assert prompts[0] == prompts[1] == prompts[2] and len(set(prompts[0])) == 5
    assert all(len(p.split()) >= 8 for p in prompts[0])  # 12 tokens of PTB, some of them line ends

    # log_model: the best and the last checkpoint, as `model` artifacts of this run
    models = {json.loads(a.metadata)["original_filename"]: set(a.aliases) for a in run.artifacts if a.type == "model"}
    best = metrics["tested_checkpoint"].rsplit("/", 1)[-1]
    assert best.startswith("best-") and models[best] >= {"best"} and "last.ckpt" in models
    staged = [c.local_path for a in run.artifacts if a.type == "model" for c in a.manifest.contents]
    assert staged and all(p.startswith(str(tmp_path)) for p in staged)  # what `wandb sync` uploads


def test_log_model_is_off_by_default_and_nothing_is_uploaded(tmp_path):
    cfg = compose_cfg(WANDB + TINY_RNN + ["model=lstm", "data=ptb", "test=false"], tmp_path)
    assert cfg.logger.wandb.log_model is False
    train(cfg, tmp_path)
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    assert not [a for a in OfflineRun.read(run_dir).artifacts if a.type == "model"]


# -- each task's samples, on its first validation batch --------------------------------------------
GPT = ["model.n_layer=1", "model.n_head=2", "model.d_model=16", "model.context=16", "data.batch_size=4",
       "data.eval_batch_size=16"]


def _first_val_batch(overrides, tmp_path):
    cfg = compose_cfg(TINY + overrides, tmp_path)
    datamodule, model = build(cfg)
    batch = next(iter(datamodule.val_dataloader()))
    return model.eval(), datamodule.on_after_batch_transfer(batch, 0)  # as Lightning hands it over (images)


@pytest.mark.parametrize("overrides", [["model=gpt", "data=ptb", *GPT], ["model=lstm", "data=ptb", *TINY_RNN]],
                         ids=["gpt", "lstm"])
def test_lm_samples_are_greedy_continuations_that_draw_no_random_numbers(overrides, tmp_path):
    model, batch = _first_val_batch(overrides, tmp_path)
    rng = torch.get_rng_state()
    with torch.no_grad():
        columns, rows = model.task.samples(model, batch, 4)
        again = model.task.samples(model, batch, 4)[1]
    assert torch.equal(torch.get_rng_state(), rng)  # a resumed run replays the same dropout masks
    assert columns == ["prompt", "continuation"] and rows == again and len(rows) == 4
    tokenizer = model.spec.tokenizer
    assert rows[0][0] == tokenizer.decode(batch["input"][0, :12].tolist()).replace("\n", "\\n")
    assert all(len(tokenizer.encode(cont)) == 30 for _, cont in rows if not cont.endswith("<eos>"))


def test_lm_samples_are_one_line_each_and_stop_at_the_first_eos(tmp_path, monkeypatch):
    """A cell shows text: line ends escaped, the continuation cut at its first <eos> (marked), and an
    untrained model's <eos> right away said in words rather than shown as thirty blank lines."""
    model, batch = _first_val_batch(["model=lstm", "data=ptb", *TINY_RNN], tmp_path)
    tokenizer, eos = model.spec.tokenizer, model.spec.eos_id
    words = tokenizer.encode("the company said").tolist()
    prompt = words + [eos] + words  # a prompt across a line end
    continuations = [[eos] * 7, words + [eos] + words, (words * 3)[:7]]
    monkeypatch.setattr(model, "generate", lambda p, n, temperature: torch.tensor(
        [prompt + c for c in continuations]))
    batch = {**batch, "input": torch.tensor([prompt] * 3)}
    _, rows = model.task.samples(model, batch, 3, prompt_len=len(prompt))
    assert [r[0] for r in rows] == ["the company said\\nthe company said"] * 3
    assert [r[1] for r in rows] == ["(nothing: <eos> first)", "the company said <eos>",
                                    "the company said the company said the"]
    assert not any("\n" in cell for row in rows for cell in row)


@pytest.mark.corpus("sst2")
def test_classification_samples_are_the_misclassified_examples(tmp_path):
    model, batch = _first_val_batch(["model=lstm", "data=sst2", *TINY_RNN], tmp_path)
    with torch.no_grad():
        columns, rows = model.task.samples(model, batch, 100)
        predicted = model.classify(batch).argmax(-1)
    wrong = (predicted != batch["label"]).nonzero().flatten().tolist()
    assert 0 < len(wrong) < len(batch["label"])  # an untrained model: some right, some wrong
    assert columns == ["example", "gold", "predicted", "p(predicted)"]
    assert [r[0] for r in rows] == [" ".join(batch["words"][i]) for i in wrong]
    assert all(r[1] != r[2] and r[1] in ("negative", "positive") and 0.5 <= r[3] <= 1 for r in rows)
    with torch.no_grad():
        assert len(model.task.samples(model, batch, 3)[1]) == min(3, len(wrong))


@pytest.mark.corpus("conll2003")
def test_tagging_samples_show_gold_and_predicted_spans(tmp_path):
    from seqbench.metrics.spans import chunks

    model, batch = _first_val_batch(["model=lstm", "data=conll2003", *TINY_RNN], tmp_path)
    with torch.no_grad():
        columns, rows = model.task.samples(model, batch, 6)
    names = model.spec.extras["tag_names"]
    assert columns[:3] == ["sentence", "gold spans", "predicted spans"] and len(rows) == 6
    for i, (sentence, gold, predicted, correct, n_gold) in enumerate(rows):
        words = batch["words"][i]
        tags = [names[t] for t in batch["tags"][i, : len(words)].tolist()]
        assert sentence == " ".join(words) and n_gold == len(chunks(tags)) and correct <= n_gold
        for kind, a, b in chunks(tags):
            assert f"{kind}: {' '.join(words[a:b + 1])}" in gold
    assert any(r[1] for r in rows)  # some sentence has entities


@pytest.mark.corpus("mnist")
def test_image_samples_are_pictures(tmp_path):
    model, batch = _first_val_batch(["preset=mnist/cnn"], tmp_path)
    with torch.no_grad():
        _, rows = model.task.samples(model, batch, 4)
    assert rows and all(r[0].shape == (1, 28, 28) and r[0].min() == 0 and r[0].max() == 1 for r in rows)
    assert isinstance(_cell(rows[0][0]), wandb.Image) and _cell(rows[0][1]) == rows[0][1]  # how the table shows it


def test_regression_samples_pair_targets_with_predictions(tmp_path):
    model, batch = _first_val_batch(["preset=probe/gru", "data=adding", "data.T=20"], tmp_path)
    with torch.no_grad():
        columns, rows = model.task.samples(model, batch, 5)
        prediction = model.regress({k: v[:5] for k, v in batch.items()})
    assert columns == ["target", "prediction", "squared error"]
    assert [r[0] for r in rows] == pytest.approx(batch["target"][:5].tolist())
    assert [r[1] for r in rows] == pytest.approx(prediction.tolist())


@pytest.mark.corpus("sst2")
def test_mlm_samples_show_the_masked_pieces_and_the_guesses(tmp_path):
    from seqbench.data.streams import IGNORE_INDEX

    model, batch = _first_val_batch(["model=bert", "data=pretrain_text", "model.n_layer=1", "model.n_head=2",
                                     "model.d_model=16", "data.source=sst2", "data.max_pairs=100",
                                     "data.vocab_size=300"], tmp_path)
    with torch.no_grad():
        columns, rows = model.task.samples(model, batch, 5)
    assert columns[:3] == ["input", "masked pieces", "predicted pieces"] and len(rows) == 5
    for b, row in enumerate(rows):
        masked = int((batch["mlm_labels"][b] != IGNORE_INDEX).sum())
        assert len(row[1].split()) == len(row[2].split()) == masked and row[3] <= masked
        assert row[0].startswith("[CLS]") and row[4] == int(batch["nsp_label"][b])


@pytest.mark.slow
@pytest.mark.corpus("multi30k")
def test_translation_samples_pair_source_reference_and_hypothesis(tmp_path):
    model, batch = _first_val_batch(["model=lstm", "data=multi30k", "model.attention=bahdanau", *TINY_RNN], tmp_path)
    with torch.no_grad():
        columns, rows = model.task.samples(model, batch, 3)
    extras = model.spec.extras
    assert columns == ["source", "reference", "hypothesis"] and len(rows) == 3
    for i, (source, reference, _) in zip(batch["index"].tolist(), rows):
        assert source == extras["sources"]["val"][i] and reference == extras["references"]["val"][i]
