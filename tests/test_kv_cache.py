"""Decoding with the key/value cache gives what re-reading the whole prefix gives (`seqbench.nn.kv_cache`).

Random weights, a fixed seed: every step's logits agree to ~1e-5 and greedy search, beam search
(beams re-ranked, so the cache must follow them) and GPT / Transformer-LM generation (past the
context, where the window slides) produce the same tokens, on a source batch with padding and an
<eos> chosen so that rows end at different steps.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch

from seqbench.data.spec import TaskSpec
from seqbench.models.gpt import GPTModel
from seqbench.models.recurrent import RecurrentModel
from seqbench.models.t5 import T5Model
from seqbench.models.transformer import TransformerModel
from seqbench.nn.decoding import beam_search, greedy

ADAM = partial(torch.optim.Adam, lr=1e-3)
V, BOS, PAD = 30, 2, 0
SPEC = TaskSpec("translation", src_vocab_size=V + 3, tgt_vocab_size=V, pad_id=PAD, bos_id=BOS, eos_id=3, max_len=40)
TRANSFORMER = dict(n_layer=2, n_head=2, d_model=32, d_ff=64, dropout=0.0, context=32, tie_weights=False)
FAMILIES = {
    "transformer": lambda: TransformerModel(SPEC, ADAM, **TRANSFORMER),  # post-LN, sinusoidal, SDPA
    "transformer-preln-learned-reference": lambda: TransformerModel(
        SPEC, ADAM, **TRANSFORMER, norm_first=True, positions="learned", attn_impl="reference", n_dec_layer=3),
    "t5": lambda: _spread(T5Model(SPEC, ADAM, n_layer=2, n_head=2, d_model=32, d_kv=16, d_ff=64, dropout=0.0,
                                  num_buckets=8, max_distance=16)),  # small buckets: offsets past 4 share log buckets
    "gru-luong-feed": lambda: RecurrentModel(SPEC, ADAM, cell="gru", embedding_size=16, hidden_size=16, num_layers=1,
                                        dropout=0.0, attention="luong_general", input_feeding=True,
                                        tie_weights=False),  # input feeding: state beyond the cell
}


def _spread(model):
    """Larger random weights. An untrained net with a tied output layer mostly repeats the token it
    reads (T5 always ties; the Transformer above does not), so no <eos> could end rows at different steps."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.5)
    return model


def _model(family: str, seed: int = 0):
    torch.manual_seed(seed)
    return FAMILIES[family]().eval()


def _batch() -> dict:
    """Five sources of different lengths, right-padded (one of a single token)."""
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([7, 3, 5, 1, 6])
    src = torch.randint(4, V + 3, (5, 7), generator=g)
    src[torch.arange(7)[None, :] >= lengths[:, None]] = PAD
    return {"src": src, "src_lengths": lengths}


def _eos_ending_rows_at_different_steps(model, batch: dict, steps: int) -> int:
    """A token that greedy decoding (no <eos>) first emits at the most different steps across rows: as
    <eos>, it ends the rows at those steps, so finished and live rows share the batch."""
    free = greedy(model, batch, BOS, -1, PAD, steps, use_cache=False)  # (B, steps): -1 never ends a row
    firsts = {tok: {int((row == tok).nonzero()[0]) if bool((row == tok).any()) else steps for row in free}
              for tok in range(3, V)}
    return max(firsts, key=lambda tok: len(firsts[tok]))


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_cached_step_gives_the_logits_of_rereading_the_prefix(family):
    model, batch = _model(family), _batch()
    tokens = torch.cat([torch.full((5, 1), BOS), torch.randint(3, V, (5, 15))], dim=1)  # (B, 16) <bos> first
    with torch.no_grad():
        forced = model.translate_logits({**batch, "tgt_in": tokens})  # (B, 16, V): training's teacher forcing
        memory, state = model.encode(batch), None
        for t in range(1, tokens.size(1) + 1):
            cached, state = model.decode_step(memory, tokens[:, :t], state)  # reads only token t - 1
            full, _ = model.decode_step(memory, tokens[:, :t], None)  # reads all t tokens
            # float32 sums over other shapes (and, with 2+ threads, other blockings): 1e-4 of logits of
            # order 1; a wrong position or a stale key moves them by 1e-2 and more
            assert torch.allclose(cached, full, atol=1e-4, rtol=1e-4), f"step {t}"
            assert torch.allclose(cached, forced[:, t - 1], atol=1e-4, rtol=1e-4), f"step {t}"  # as in training


@pytest.mark.parametrize("family", ["transformer", "transformer-preln-learned-reference", "t5"])
@pytest.mark.parametrize("seed", [0, 1])
def test_cached_greedy_and_beam_search_decode_the_same_tokens(family, seed):
    model, batch, steps = _model(family, seed), _batch(), 14
    eos = _eos_ending_rows_at_different_steps(model, batch, steps)
    out = greedy(model, batch, BOS, eos, PAD, steps, use_cache=False)
    ends = {int((row == eos).nonzero()[0]) if bool((row == eos).any()) else None for row in out}
    assert len(ends) >= 2, "rows end at different steps (or not at all)"
    assert torch.equal(greedy(model, batch, BOS, eos, PAD, steps), out)
    for beam in (3, 4):
        slow = beam_search(model, batch, BOS, eos, PAD, steps, beam=beam, alpha=0.6, use_cache=False)
        assert torch.equal(beam_search(model, batch, BOS, eos, PAD, steps, beam=beam, alpha=0.6), slow), f"beam {beam}"


LM = TaskSpec("lm", vocab_size=V)


@pytest.mark.parametrize("family", ["gpt", "transformer"])
def test_cached_generation_matches_and_slides_past_the_context(family):
    torch.manual_seed(0)
    if family == "gpt":
        model = _spread(GPTModel(LM, ADAM, n_layer=2, n_head=2, d_model=32, context=8, dropout=0.0))
    else:  # sinusoidal positions: defined past the context, so only the comparison catches a slid cache
        model = TransformerModel(LM, ADAM, n_layer=2, n_head=2, d_model=32, context=8, dropout=0.0, tie_weights=False)
    model.eval()
    net = model.net
    tokens = torch.randint(V, (3, 8))
    with torch.no_grad():
        full, cache = net(tokens), net.new_cache()
        for t in range(tokens.size(1)):
            step = net(tokens[:, t : t + 1], cache=cache)  # (B, 1, V)
            assert torch.allclose(step[:, 0], full[:, t], atol=1e-5, rtol=1e-5), f"position {t}"
    for prompt in (tokens[:, :1], tokens[:, :5], torch.randint(V, (3, 11))):  # the last one is past the context
        fast = model.generate(prompt, max_new_tokens=20, temperature=0)
        assert fast.shape == (3, prompt.size(1) + 20)
        assert torch.equal(fast, model.generate(prompt, max_new_tokens=20, temperature=0, use_cache=False))


def test_decode_benchmark_times_both_paths_and_skips_what_the_budget_cannot_afford(tmp_path):
    from seqbench.analysis import decode_bench

    rows = decode_bench.run(["transformer", "gpt"], lengths=[2, 4], batch=2, vocab=50, max_case_s=60.0, out=tmp_path)
    assert [(r["family"], r["length"], r["cache"], r["status"]) for r in rows] == [
        (f, n, c, "ok") for f in ("transformer", "gpt") for c in (True, False) for n in (2, 4)]
    for row in rows:
        assert row["tokens_per_s"] == pytest.approx(2 * row["length"] / row["seconds"])
    assert (tmp_path / "decode_bench.csv").read_text().count("\n") == 1 + len(rows)
    assert "| gpt | 4 |" in (tmp_path / "decode_bench.md").read_text()
    rows = decode_bench.run(["gpt"], lengths=[2, 4], batch=1, vocab=50, max_case_s=0.0)
    assert rows[1]["status"].startswith("skipped: ~") and rows[0]["status"] == "ok"
