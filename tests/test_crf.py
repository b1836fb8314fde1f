"""The linear-chain CRF's forward recursion and Viterbi against enumeration of every tag path."""

from __future__ import annotations

import itertools

import torch

from seqbench.nn.crf import CRF, chain_log_partition, chain_score, chain_viterbi


def _brute(emissions, transitions, start, end, mask):
    """Every path over the masked positions of each row: its score, by the formula."""
    out = []
    K = emissions.size(-1)
    for b in range(emissions.size(0)):
        pos = [t for t in range(emissions.size(1)) if mask[b, t]]
        scores = {}
        for path in itertools.product(range(K), repeat=len(pos)):
            s = start[path[0]] + end[path[-1]]
            s = s + sum(emissions[b, t, y] for t, y in zip(pos, path))
            s = s + sum(transitions[path[i - 1], path[i]] for i in range(1, len(path)))
            scores[path] = s
        out.append((pos, scores))
    return out


def _case(seed=0, B=3, T=5, K=3):
    g = torch.Generator().manual_seed(seed)
    emissions = torch.randn(B, T, K, generator=g, dtype=torch.float64)
    transitions = torch.randn(K, K, generator=g, dtype=torch.float64)
    start, end = torch.randn(K, generator=g, dtype=torch.float64), torch.randn(K, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 1, 1, 0]], dtype=torch.bool)  # padding, a hole
    return emissions, transitions, start, end, mask


def test_partition_function_and_best_path_match_enumeration():
    emissions, transitions, start, end, mask = _case()
    log_z = chain_log_partition(emissions, transitions, start, end, mask)
    path, best = chain_viterbi(emissions, transitions, start, end, mask)
    for b, (pos, scores) in enumerate(_brute(emissions, transitions, start, end, mask)):
        values = torch.stack(list(scores.values()))
        torch.testing.assert_close(log_z[b], torch.logsumexp(values, 0))
        argmax = max(scores, key=lambda p: scores[p].item())
        assert tuple(path[b, pos].tolist()) == argmax
        torch.testing.assert_close(best[b], scores[argmax])


def test_path_score_matches_the_formula_and_probabilities_sum_to_one():
    emissions, transitions, start, end, mask = _case(seed=1)
    tags = torch.randint(0, 3, mask.shape, generator=torch.Generator().manual_seed(2))
    score = chain_score(emissions, tags, transitions, start, end, mask)
    for b, (pos, scores) in enumerate(_brute(emissions, transitions, start, end, mask)):
        torch.testing.assert_close(score[b], scores[tuple(tags[b, pos].tolist())])
    crf = CRF(3).double()
    with torch.no_grad():
        crf.transitions.copy_(transitions), crf.start.copy_(start), crf.end.copy_(end)
    # p(y|x) over all paths of row 1 (3 scored tokens) sums to 1
    total = sum(torch.exp(-crf.nll(emissions[1:2], torch.tensor([list(p) + [0, 0]]), mask[1:2]) * 3)
                for p in itertools.product(range(3), repeat=3))
    torch.testing.assert_close(total, torch.tensor(1.0, dtype=torch.float64))


def test_crf_learns_a_transition_constraint():
    """Emissions that cannot tell tags 1 and 2 apart; the data says 2 always follows 1."""
    torch.manual_seed(0)
    crf = CRF(3)
    opt = torch.optim.Adam(crf.parameters(), lr=0.1)
    tags = torch.tensor([[1, 2, 0, 1, 2]])
    emissions = torch.zeros(1, 5, 3)
    emissions[0, :, 0] = torch.tensor([-5.0, -5.0, 5.0, -5.0, -5.0])
    mask = torch.ones(1, 5, dtype=torch.bool)
    for _ in range(100):
        opt.zero_grad()
        crf.nll(emissions, tags, mask).backward()
        opt.step()
    assert crf.decode(emissions, mask).tolist() == tags.tolist()
