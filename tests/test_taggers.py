"""CoNLL-2003 end to end on a few batches: the BiLSTM-CRF with character features and the supervised
HMM train, validate and test through `seqbench.run.train`, and the tagging task logs entity F1."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from conftest import DATA_DIR
from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError
from seqbench.models.recurrent import RecurrentModel
from seqbench.run import train

needs_data = pytest.mark.skipif(not (DATA_DIR / "conll2003").is_dir(), reason="corpora not present")


@needs_data
def test_bilstm_crf_with_char_features_logs_entity_f1(cfg_factory, tmp_path):
    cfg = cfg_factory(["data=conll2003", "model.bidirectional=true", "model.crf=true", "model.char_features=8",
                       "model.num_layers=1", "data.eval_batch_size=32", "~callbacks.learning_curve"])
    metrics = train(cfg, tmp_path)
    assert metrics["status"] == "completed"
    for key in ("val/f1", "test/f1", "test/precision", "test/recall", "test/acc"):
        assert 0.0 <= metrics[key] <= 1.0


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
