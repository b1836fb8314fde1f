"""Attention: the SDPA fast path against the written-out formula, masks, positions, blocks, GPT init."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from seqbench.nn.attention import MultiHeadAttention, attention, attention_mask
from seqbench.nn.gpt import GPT, GPTConfig
from seqbench.nn.positions import SinusoidalPositions
from seqbench.nn.transformer import TransformerBlock, TransformerStack
from seqbench.nn.transformer_lm import TransformerLM

B, NH, HS = 2, 3, 4


def _grads(fn, *tensors):
    for t in tensors:
        t.grad = None
    out = fn()
    out.pow(2).sum().backward()
    return out.detach(), [t.grad.clone() for t in tensors]


def _padding(S: int, lengths: list[int], left: bool = False) -> torch.Tensor:
    """(B, S) True at padding; right padding by default, left padding when `left`."""
    pad = torch.arange(S)[None, :] >= torch.tensor(lengths)[:, None]
    return pad.flip(1) if left else pad


@pytest.mark.parametrize("case", ["none", "causal", "padding", "causal+padding", "causal+left-padding",
                                  "cross", "cross-causal"])
def test_sdpa_and_reference_agree_in_outputs_and_gradients(case):
    torch.manual_seed(0)
    T = 5
    S = 7 if case.startswith("cross") else T
    q = torch.randn(B, NH, T, HS, dtype=torch.double, requires_grad=True)
    k = torch.randn(B, NH, S, HS, dtype=torch.double, requires_grad=True)
    v = torch.randn(B, NH, S, HS, dtype=torch.double, requires_grad=True)
    causal = "causal" in case
    pad = None
    if "padding" in case or case == "cross":
        pad = _padding(S, [S, S - 2], left="left" in case)  # the second sequence is 2 shorter
    runs = {impl: _grads(lambda impl=impl: attention(q, k, v, causal, pad, impl=impl), q, k, v)
            for impl in ("sdpa", "reference")}
    out_s, grads_s = runs["sdpa"]
    out_r, grads_r = runs["reference"]
    torch.testing.assert_close(out_r, out_s, atol=1e-10, rtol=1e-10)
    for gr, gs in zip(grads_r, grads_s):
        torch.testing.assert_close(gr, gs, atol=1e-10, rtol=1e-10)
    if case == "causal+left-padding":  # query 0 of the padded sequence sees no key: zeros, not NaN
        assert torch.all(out_r[1, :, 0] == 0) and torch.isfinite(torch.stack(grads_r)).all()


def test_reference_is_the_textbook_formula():
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 1, 3, 2, dtype=torch.double) for _ in range(3))
    expected = torch.softmax(q[0, 0] @ k[0, 0].T / math.sqrt(2), dim=-1) @ v[0, 0]
    torch.testing.assert_close(attention(q, k, v, impl="reference")[0, 0], expected)
    # causal: the first query can only read the first value
    torch.testing.assert_close(attention(q, k, v, causal=True, impl="reference")[0, 0, 0], v[0, 0, 0])


def test_causal_mask_aligns_the_last_query_with_the_last_key():
    allowed = attention_mask(2, 4, causal=True)  # 2 new queries after 2 cached keys
    assert allowed.tolist() == [[True, True, True, False], [True, True, True, True]]


@pytest.mark.parametrize("cross", [False, True])
def test_multihead_module_fast_and_reference_paths_agree(cross):
    torch.manual_seed(2)
    fast = MultiHeadAttention(12, 3, cross=cross).double()
    ref = MultiHeadAttention(12, 3, cross=cross, impl="reference").double()
    ref.load_state_dict(fast.state_dict())
    x = torch.randn(B, 5, 12, dtype=torch.double, requires_grad=True)
    memory = torch.randn(B, 6, 12, dtype=torch.double) if cross else None
    pad = _padding(6 if cross else 5, [6 if cross else 5, 3])
    outs = []
    for module in (fast, ref):
        out, (gx,) = _grads(lambda m=module: m(x, memory, causal=not cross, key_padding_mask=pad), x)
        outs.append((out, gx, [p.grad.clone() for p in module.parameters()]))
        module.zero_grad()
    (o1, g1, p1), (o2, g2, p2) = outs
    torch.testing.assert_close(o2, o1)
    torch.testing.assert_close(g2, g1)
    for a, b in zip(p2, p1):
        torch.testing.assert_close(a, b)


def test_multihead_matches_pytorch_multiheadattention():
    # an independent implementation of the same equations, given the same weights
    torch.manual_seed(3)
    ours = MultiHeadAttention(8, 2, impl="reference")
    theirs = nn.MultiheadAttention(8, 2, batch_first=True)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(ours.qkv_proj.weight)
        theirs.in_proj_bias.copy_(ours.qkv_proj.bias)
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)
    x = torch.randn(2, 6, 8)
    pad = _padding(6, [6, 4])
    mask = ~attention_mask(6, 6, causal=True)  # nn.MultiheadAttention: True = not allowed
    expected, _ = theirs(x, x, x, key_padding_mask=pad, attn_mask=mask, need_weights=False)
    torch.testing.assert_close(ours(x, causal=True, key_padding_mask=pad), expected, atol=1e-6, rtol=1e-5)


def _lms(attn_impl: str):
    torch.manual_seed(4)
    gpt = GPT(GPTConfig(vocab_size=11, context=16, n_layer=2, n_head=2, d_model=16, attn_impl=attn_impl))
    post_ln = TransformerLM(11, context=16, n_layer=2, n_head=2, d_model=16, attn_impl=attn_impl)
    pre_ln = TransformerLM(11, context=16, n_layer=2, n_head=2, d_model=16, norm_first=True, attn_impl=attn_impl)
    return {"gpt": gpt, "transformer post-LN": post_ln, "transformer pre-LN": pre_ln}


@pytest.mark.parametrize("attn_impl", ["sdpa", "reference"])
def test_no_future_token_influences_the_past(attn_impl):
    tokens = torch.randint(11, (2, 12), generator=torch.Generator().manual_seed(5))
    for name, net in _lms(attn_impl).items():
        net.eval()
        base = net(tokens)
        for t in (0, 5, 10):
            changed = tokens.clone()
            changed[:, t + 1] = (changed[:, t + 1] + 1) % 11  # perturb token t+1
            out = net(changed)
            torch.testing.assert_close(out[:, : t + 1], base[:, : t + 1], atol=0, rtol=0, msg=name)
            assert not torch.allclose(out[:, t + 1], base[:, t + 1]), f"{name}: token t+1 had no effect"


def test_lm_fast_and_reference_paths_agree_with_dropout_off():
    fast, ref = _lms("sdpa"), _lms("reference")
    tokens = torch.randint(11, (2, 9), generator=torch.Generator().manual_seed(6))
    for name in fast:
        ref[name].load_state_dict(fast[name].state_dict())
        ref[name].eval(), fast[name].eval()  # the Transformer's dropout (0.1) is off in eval mode
        torch.testing.assert_close(ref[name](tokens), fast[name](tokens), atol=1e-5, rtol=1e-5, msg=name)


def test_decoder_block_reads_the_encoder_but_not_its_padding():
    torch.manual_seed(7)
    encoder = TransformerStack(2, 16, 4, dropout=0.0)
    decoder = TransformerStack(2, 16, 4, dropout=0.0, cross_attention=True).eval()
    src, tgt = torch.randn(2, 6, 16), torch.randn(2, 4, 16)
    src_pad = _padding(6, [6, 3])
    memory = encoder(src, key_padding_mask=src_pad)
    out = decoder(tgt, memory, causal=True, memory_padding_mask=src_pad)
    noisy = memory.clone()
    noisy[1, 3:] += 100.0  # change only the padding of the second source
    torch.testing.assert_close(decoder(tgt, noisy, causal=True, memory_padding_mask=src_pad), out)
    noisy[1, 0] += 1.0  # a real source position does matter
    assert not torch.allclose(decoder(tgt, noisy, causal=True, memory_padding_mask=src_pad)[1], out[1])


def test_post_ln_normalises_the_residual_stream_and_pre_ln_does_not():
    torch.manual_seed(8)
    x = 3.0 * torch.randn(2, 5, 32) + 1.0
    post = TransformerBlock(32, 4, dropout=0.0, norm_first=False)(x)
    pre = TransformerBlock(32, 4, dropout=0.0, norm_first=True)(x)
    torch.testing.assert_close(post.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(post.var(-1, unbiased=False), torch.ones(2, 5), atol=1e-3, rtol=0)
    assert pre.var(-1, unbiased=False).mean() > 4  # x + f(LN(x)): the stream keeps its scale


def test_sinusoidal_positions_follow_the_formula():
    d = 8
    table = SinusoidalPositions(d, max_len=4)(T=50, offset=3)  # also extends past max_len
    for pos, i in [(3, 0), (10, 1), (52, 3)]:
        angle = pos / 10000 ** (2 * i / d)
        assert math.isclose(table[pos - 3, 2 * i].item(), math.sin(angle), abs_tol=1e-5)
        assert math.isclose(table[pos - 3, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-5)


def test_gpt_ties_its_head_and_scales_the_residual_projections():
    L = 6
    gpt = GPT(GPTConfig(vocab_size=50, context=8, n_layer=L, n_head=4, d_model=256))
    assert gpt.lm_head.weight is gpt.tok_emb.weight
    residual = torch.cat([p.weight.flatten() for p in gpt.blocks.residual_projections()])
    others = gpt.blocks.blocks[0].self_attn.qkv_proj.weight
    assert math.isclose(residual.std().item(), 0.02 / math.sqrt(2 * L), rel_tol=0.05)
    assert math.isclose(others.std().item(), 0.02, rel_tol=0.05)
    with pytest.raises(ValueError, match="model.context"):
        gpt(torch.zeros(1, 9, dtype=torch.long))  # longer than the learned positions
