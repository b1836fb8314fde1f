"""Each family's training-FLOPs formula (seqbench.nn.flops) against torch's FlopCounterMode on one step.

FlopCounterMode counts the matmuls torch dispatches, forward and backward. Three fast CPU paths are
opaque to it (it sees no matmul or convolution inside): oneDNN's LSTM, SDPA's causal flash kernel and
the Mamba blocks' depthwise conv as shifted multiply-adds. For those the check runs the textbook
implementation of the same network (`impl=reference`, `attn_impl=reference`, and `F.conv1d` for the
conv), which does the same products in readable form (tests/test_cells.py, test_attention.py and
test_causal_conv.py check they agree numerically). The window is longer than d_model so that the attention term is over 10 % of the
count: leaving it out, or halving it for the causal mask, fails the check.

The formulas match the counter within 0.25 %, so the check allows 1 %: smaller mistakes than a
missing term fail it too. The sizes are chosen so that each part of a formula is visible: the
embedding is narrower than the hidden state and there are three layers (a layer above the first read
at the embedding's width is 4-10 % off), the Transformer's d_ff is not 4·d_model (a formula that
assumes 4·d fails), and AWD-LSTM's stack has a last layer as wide as the embedding (per-layer widths).
"""

from __future__ import annotations

import functools
from unittest import mock

import hydra
import pytest
import torch

from conftest import compose_cfg
from seqbench.data.spec import TaskSpec
from seqbench.families import FAMILIES
from seqbench.models.recurrent import RecurrentModel
from seqbench.nn import causal_conv
from seqbench.nn.flop_count import counted_flops
from seqbench.nn.flops import attention_forward_flops, recurrent_forward_flops
from seqbench.nn.scan import default_method
from seqbench.nn.ssm import SelectiveSSM
from seqbench.tasks.lm import token_nll

V, B, T = 60, 4, 64
SGD = functools.partial(torch.optim.SGD, lr=0.1)
SPEC = TaskSpec("lm", vocab_size=V)
COUNTED = [name for name, family in FAMILIES.items() if family.flops is not None]
# sizes that make each term of a formula visible, by the formula a family follows: E != H and three
# layers for a recurrent stack; three layers and d_ff != 4 d for attention (where the family has d_ff)
SIZES = {recurrent_forward_flops: {"embedding_size": 16, "hidden_size": 40, "num_layers": 3, "tie_weights": False},
         attention_forward_flops: {"n_layer": 3, "n_head": 2, "d_model": 32, "d_ff": 48, "context": T}}
READABLE = {"impl": "reference", "attn_impl": "reference"}
CASES = [*COUNTED, "lstm:awd"]  # AWD-LSTM: a tied last layer as wide as the embedding (widths 40, 40, 16)
AWD = {"lock_dropout": True, "tie_weights": True}


def build(case: str, tmp_path):
    """The family (`name` or `name:awd`) at the stressing sizes, every matmul in readable form."""
    family, _, variant = case.partition(":")
    cfg = compose_cfg([f"model={family}", *FAMILIES[family].tiny], tmp_path)
    values = {**SIZES.get(FAMILIES[family].flops, {}), **READABLE, **(AWD if variant == "awd" else {})}
    for key, value in values.items():
        if key in cfg.model:
            cfg.model[key] = value
    return hydra.utils.instantiate(cfg.model, spec=SPEC)


def counted_flops_per_token(model) -> float:
    x = torch.randint(V, (B, T + 1))
    batch = {"input": x[:, :-1], "target": x[:, 1:], "window": 0}
    model.train()

    def step():
        nll, n = token_nll(model.lm_logits(batch, "train"), batch["target"])
        return nll / n

    # the causal conv's readable form, whose convolution the counter sees (the fast one is a sum of shifts)
    with mock.patch.object(causal_conv, "depthwise", causal_conv.depthwise_reference):
        counted = counted_flops(step)
    return (counted + unseen_scan_reductions(model) * B * T) / (B * T)


def unseen_scan_reductions(model) -> int:
    """FLOPs per token the counter cannot see: the Mamba-1 block's fused CPU scan computes C's and B's
    gradients (sum over E of dy h and of x g, 2·E·N each per step) as a product and a sum in its (B, N, E)
    layout, elementwise ops FlopCounterMode does not count; its other contractions are bmm, counted."""
    blocks = [m for m in model.modules() if isinstance(m, SelectiveSSM)
              and m.selective and (m.scan or default_method(torch.device("cpu"))) == "loop"]
    return sum(4 * m.A_log.numel() for m in blocks)  # A_log (E, N)


@pytest.mark.parametrize("case", CASES)
def test_formula_matches_the_flop_counter_on_a_training_step(case, tmp_path):
    torch.manual_seed(0)
    model = build(case, tmp_path)
    assert model.flops_per_token(T) == pytest.approx(counted_flops_per_token(model), rel=0.01)


def test_the_sizes_make_every_term_visible(tmp_path):
    """The stressing sizes reach the models: a recurrent stack with E != H over three layers, AWD's
    per-layer widths, and a Transformer whose d_ff is not 4 d."""
    lstm, awd = build("lstm", tmp_path), build("lstm:awd", tmp_path)
    assert (lstm.hparams.embedding_size, lstm.hparams.hidden_size, lstm.hparams.num_layers) == (16, 40, 3)
    assert awd.hparams.tie_weights and awd.hparams.lock_dropout
    assert [name for name in COUNTED if "d_ff" in build(name, tmp_path).hparams]
    for name in COUNTED:
        model = build(name, tmp_path)
        if "d_ff" in model.hparams:
            assert model.hparams.d_ff == 48 != 4 * model.hparams.d_model


def test_attention_term_grows_with_the_window_and_recurrent_cost_does_not(tmp_path):
    gpt, lstm = build("gpt", tmp_path), build("lstm", tmp_path)
    # QKᵀ and AV: 4·T·d per layer forward, x 3 for training
    layers, d = gpt.net.cfg.n_layer, gpt.net.cfg.d_model
    assert (layers, d) == (3, 32)
    assert gpt.flops_per_token(2 * T) - gpt.flops_per_token(T) == 3 * 4 * layers * d * T
    assert lstm.flops_per_token(2 * T) == lstm.flops_per_token(T)


@pytest.mark.parametrize("family", [name for name, f in FAMILIES.items() if "lm" in f.tasks])
def test_exactly_the_families_the_registry_gives_a_formula_count_flops(family, tmp_path):
    """...and `model=mixer`, whose layer brings its own formula or is measured (tests/test_mixer.py)."""
    model = build(family, tmp_path)
    measures = getattr(model, "flops_source", None) is not None
    assert (model.flops_per_token(T) is not None) == (FAMILIES[family].flops is not None or measures)


def test_families_without_a_count_say_none():
    classifier = RecurrentModel(TaskSpec("classification", vocab_size=V, num_classes=2, pad_id=0), SGD)
    assert classifier.flops_per_token() is None
