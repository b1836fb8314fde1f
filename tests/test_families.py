"""Family presets: the comparison's models are matched in size and each keeps its own recipe."""

from __future__ import annotations

import hydra
import pytest

from conftest import compose_cfg
from seqbench.data.spec import TaskSpec

FAMILIES = ["rnn", "lstm", "gru", "transformer", "gpt"]
CORPORA = {"ptb": 10_000, "shakespeare": 65}


@pytest.mark.parametrize("corpus", CORPORA)
def test_presets_match_parameters_without_embeddings_within_one_percent(corpus, tmp_path):
    counts, recipes = {}, {}
    for family in FAMILIES:
        cfg = compose_cfg([f"+family={corpus}/{family}"], tmp_path)
        model = hydra.utils.instantiate(cfg.model, spec=TaskSpec("lm", vocab_size=CORPORA[corpus]))
        counts[family] = model.num_params(non_embedding=True)
        recipes[family] = (cfg.model.optimizer._target_.rsplit(".", 1)[-1], model.lm_batching)
    mean = sum(counts.values()) / len(counts)
    assert all(abs(n - mean) / mean < 0.01 for n in counts.values()), counts
    assert recipes["gpt"] == recipes["transformer"] == ("AdamW", "windows")
    assert {recipes[f][1] for f in ("rnn", "lstm", "gru")} == {"stream"}


def test_ptb_families_sweeps_the_five_presets(tmp_path):
    cfg = compose_cfg(["experiment=ptb_families"], tmp_path)
    swept = cfg.hydra.sweeper.params["+family"].split(",")
    assert swept == [f"ptb/{f}" for f in FAMILIES]
    assert cfg.data._target_.endswith("PTBDataModule")
