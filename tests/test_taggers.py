"""CoNLL-2003 end to end on a few batches: the BiLSTM-CRF with character features and the supervised
HMM train, validate and test through `seqbench.training.run.train`, and the tagging task logs entity F1."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError
from seqbench.models.recurrent import RecurrentModel
from seqbench.training.run import train

needs_data = pytest.mark.corpus("conll2003")


@needs_data
def test_bilstm_crf_with_char_features_logs_entity_f1(cfg_factory, tmp_path, seed, record_property):
    """The model learns entities, and the logged entity scores (and accuracy) are seqeval's on the same
    sentences and predictions.

    100 batches of 16 at Adam 3e-2 (clipped at 5) take it past the all-O stage (at 4 batches F1 is
    0.02, after 60 batches of 32 at 1e-2 still 0): entity F1 on 256 test sentences was 0.545-0.623
    over seeds 0, 1, 2, 4, 5 (Intel Xeon, 1 thread), so 0.3 leaves room for another CPU's rounding
    and another seed (SEQBENCH_TEST_SEED)."""
    from seqeval.metrics import f1_score, precision_score, recall_score

    from seqbench.data.streams import IGNORE_INDEX
    from seqbench.training.run import build

    cfg = cfg_factory(["data=conll2003", "model.bidirectional=true", "model.crf=true", "model.char_features=8",
                       "model.num_layers=1", "data.eval_batch_size=128", "~callbacks.learning_curve",
                       "trainer.limit_train_batches=100", "data.batch_size=16", "model.optimizer.lr=3e-2",
                       "trainer.gradient_clip_val=5", f"seed={seed}"])
    metrics = train(cfg, tmp_path)
    assert metrics["status"] == "completed"
    data, model = build(cfg)
    model.load_state_dict(torch.load(metrics["tested_checkpoint"], weights_only=True)["state_dict"])
    model.eval()
    names, gold, pred = data.spec.extras["tag_names"], [], []
    with torch.no_grad():
        for _, batch in zip(range(cfg.trainer.limit_test_batches), data.test_dataloader()):
            _, predictions = model.task.loss_and_predictions(model, batch)
            for tags, guess in zip(batch["tags"], predictions):
                scored = tags != IGNORE_INDEX
                gold.append([names[t] for t in tags[scored]])
                pred.append([names[t] for t in guess[scored]])
    record_property("learned", metrics["test/f1"])
    assert metrics["test/f1"] == pytest.approx(f1_score(gold, pred), abs=1e-6)
    assert metrics["test/precision"] == pytest.approx(precision_score(gold, pred), abs=1e-6)
    assert metrics["test/recall"] == pytest.approx(recall_score(gold, pred), abs=1e-6)
    tokens = [(g, p) for gs, ps in zip(gold, pred) for g, p in zip(gs, ps)]
    assert metrics["test/acc"] == pytest.approx(sum(g == p for g, p in tokens) / len(tokens), abs=1e-6)
    assert metrics["test/f1"] > 0.3, metrics["test/f1"]  # chunks on both sides: the comparison is not of zeros


@needs_data
def test_supervised_hmm_counts_one_pass_and_tags_well(cfg_factory, tmp_path):
    cfg = cfg_factory(["model=hmm", "data=conll2003", "data.label=pos", "trainer.max_epochs=3",
                       "trainer.limit_train_batches=100", "trainer.limit_val_batches=2",
                       "trainer.limit_test_batches=4", "data.eval_batch_size=64", "logger=csv", "trainer=cpu",
                       "trainer.enable_progress_bar=false", "~callbacks.progress_bar"], tiny=False)
    metrics = train(cfg, tmp_path)
    assert metrics["status"] == "completed"
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("best-*")) == ["best-epoch000.ckpt"]  # one pass
    assert metrics["test/acc"] > 0.8  # 3,200 training sentences are plenty for POS
    assert metrics["params"] > 0


def test_crf_needs_tagging_and_char_features_need_words():
    opt = partial(torch.optim.SGD, lr=0.1)
    with pytest.raises(ConfigError, match="crf=true"):
        RecurrentModel(TaskSpec(task="classification", vocab_size=9, num_classes=2), opt, crf=True)
    with pytest.raises(ConfigError, match="char_features"):
        RecurrentModel(TaskSpec(task="tagging", vocab_size=9, num_classes=2), opt, char_features=4)


def test_char_features_ignore_padding_words():
    spec = TaskSpec(task="tagging", vocab_size=20, num_classes=3, pad_id=0, extras={"char_vocab_size": 12})
    torch.manual_seed(0)
    model = RecurrentModel(spec, partial(torch.optim.SGD, lr=0.1), embedding_size=6, hidden_size=5, num_layers=1,
                           bidirectional=True, crf=True, char_features=4).eval()
    x, chars = torch.randint(1, 20, (1, 3)), torch.randint(1, 12, (1, 3, 5))
    chars[0, 1, 3:] = 0  # a short word
    alone = model.tag({"input": x, "chars": chars, "lengths": torch.tensor([3])})
    padded = model.tag({"input": torch.cat([x, torch.zeros(1, 2, dtype=torch.long)], 1),
                        "chars": torch.cat([torch.cat([chars, torch.zeros(1, 3, 2, dtype=torch.long)], 2),
                                            torch.zeros(1, 2, 7, dtype=torch.long)], 1),
                        "lengths": torch.tensor([3])})
    torch.testing.assert_close(padded[:, :3], alone)
