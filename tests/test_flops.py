"""Each family's training-FLOPs formula (seqbench.nn.flops) against torch's FlopCounterMode on one step.

FlopCounterMode counts the matmuls torch dispatches, forward and backward. Two fused CPU kernels are
opaque to it (it sees no matmul inside): oneDNN's LSTM and SDPA's causal flash kernel. For those the
check runs the textbook implementation of the same network (`impl=reference`, `attn_impl=reference`),
which does the same matmuls in readable form (tests/test_cells.py and test_attention.py check they
agree numerically). The window is longer than d_model so that the attention term is over 10 % of the
count: leaving it out, or halving it for the causal mask, fails the check.
"""

from __future__ import annotations

import functools

import hydra
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from conftest import compose_cfg
from seqbench.data.spec import TaskSpec
from seqbench.families import FAMILIES
from seqbench.models.recurrent import RecurrentModel
from seqbench.tasks.lm import token_nll

V, B, T = 60, 4, 64
SGD = functools.partial(torch.optim.SGD, lr=0.1)
SPEC = TaskSpec("lm", vocab_size=V)
COUNTED = [name for name, family in FAMILIES.items() if family.flops is not None]


def build(family: str, tmp_path):
    """The family at its registry's tiny sizes, every matmul in readable form, attention over T tokens."""
    cfg = compose_cfg([f"model={family}", *FAMILIES[family].tiny], tmp_path)
    for key, value in {"impl": "reference", "attn_impl": "reference", "context": T}.items():
        if key in cfg.model:
            cfg.model[key] = value
    return hydra.utils.instantiate(cfg.model, spec=SPEC)


def counted_flops_per_token(model) -> float:
    x = torch.randint(V, (B, T + 1))
    batch = {"input": x[:, :-1], "target": x[:, 1:], "window": 0}
    model.train()
    with FlopCounterMode(display=False) as counter:
        nll, n = token_nll(model.lm_logits(batch, "train"), batch["target"])
        (nll / n).backward()
    return counter.get_total_flops() / (B * T)


@pytest.mark.parametrize("family", COUNTED)
def test_formula_matches_the_flop_counter_on_a_training_step(family, tmp_path):
    torch.manual_seed(0)
    model = build(family, tmp_path)
    assert model.flops_per_token(T) == pytest.approx(counted_flops_per_token(model), rel=0.10)


def test_attention_term_grows_with_the_window_and_recurrent_cost_does_not(tmp_path):
    gpt, lstm = build("gpt", tmp_path), build("lstm", tmp_path)
    # QKᵀ and AV: 4·T·d per layer forward, x 3 for training
    layers, d = gpt.net.cfg.n_layer, gpt.net.cfg.d_model
    assert gpt.flops_per_token(2 * T) - gpt.flops_per_token(T) == 3 * 4 * layers * d * T
    assert lstm.flops_per_token(2 * T) == lstm.flops_per_token(T)


@pytest.mark.parametrize("family", [name for name, f in FAMILIES.items() if "lm" in f.tasks])
def test_exactly_the_families_the_registry_gives_a_formula_count_flops(family, tmp_path):
    assert (build(family, tmp_path).flops_per_token(T) is not None) == (FAMILIES[family].flops is not None)


def test_families_without_a_count_say_none():
    classifier = RecurrentModel(TaskSpec("classification", vocab_size=V, num_classes=2, pad_id=0), SGD)
    assert classifier.flops_per_token() is None
