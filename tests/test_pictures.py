"""Attention pictures: the recomputed probabilities are the ones the fast path used."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from seqbench.analysis.pictures import attention_probs, main, plot_attention, self_attention_layers
from seqbench.data.spec import TaskSpec
from seqbench.models.gpt import GPTModel
from seqbench.models.transformer import TransformerModel

OPT = partial(torch.optim.SGD, lr=0.1)
TAG = TaskSpec(task="tagging", vocab_size=12, num_classes=12, max_len=9)


@pytest.mark.parametrize("make, lengths", [
    (lambda: TransformerModel(TAG, OPT, n_layer=2, n_head=2, d_model=8, dropout=0.0), torch.tensor([9, 5, 7])),
    (lambda: GPTModel(TAG, OPT, n_layer=2, n_head=2, d_model=8, dropout=0.0), None),
])
def test_recomputed_probabilities_reproduce_each_layers_output(make, lengths):
    torch.manual_seed(0)
    model = make().eval()
    batch = {"input": torch.randint(0, 12, (3, 9))}
    if lengths is not None:
        batch["lengths"] = lengths
    outputs = {}
    layers = self_attention_layers(model)
    handles = [layer.register_forward_hook(lambda m, a, out, i=i: outputs.__setitem__(i, out))
               for i, layer in enumerate(layers)]
    values = {}
    handles += [layer.qkv_proj.register_forward_hook(lambda m, a, out, i=i: values.__setitem__(i, out))
                for i, layer in enumerate(layers)]
    probs = attention_probs(model, lambda: model.tag(batch))
    for h in handles:
        h.remove()
    assert len(probs) == 2 and probs[0].shape == (3, 2, 9, 9)
    for i, (layer, p) in enumerate(zip(layers, probs)):
        v = values[i].split(8, dim=2)[2].view(3, 9, 2, 4).transpose(1, 2)  # (B, nh, T, hs)
        y = (p @ v).transpose(1, 2).reshape(3, 9, 8)
        torch.testing.assert_close(layer.out_proj(y), outputs[i], atol=1e-5, rtol=1e-5)
    rows = probs[0].sum(-1)
    torch.testing.assert_close(rows, torch.ones_like(rows))
    if lengths is None:  # causal: nothing above the diagonal
        assert probs[0][..., 0, 1:].abs().max() == 0
    else:  # padding keys get no weight
        assert probs[0][1, :, :, 5:].abs().max() == 0


def test_pictures_are_written(tmp_path):
    paths = main(["positions", "--out", str(tmp_path), "--wandb", "disabled"])
    assert paths["positions"].stat().st_size > 5000
    probs = [torch.rand(1, 2, 6, 6).softmax(-1) for _ in range(2)]
    assert plot_attention(probs, tmp_path / "a.png", "t").stat().st_size > 1000
