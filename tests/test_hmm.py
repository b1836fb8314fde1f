"""The HMM baseline: forward algorithm and Viterbi against enumeration, the LM's filtering against the
marginal likelihood, the supervised tables against hand counts, and the pairs the family refuses."""

from __future__ import annotations

import itertools
from functools import partial

import pytest
import torch

from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError
from seqbench.models.hmm import HMMModel
from seqbench.nn.hmm import HMMLanguageModel, HMMTagger


def _brute_joint(log_pi, log_A, log_B, x, log_end=None):
    """{path: log p(x, path)} over every state path."""
    K = log_pi.numel()
    out = {}
    for path in itertools.product(range(K), repeat=len(x)):
        s = log_pi[path[0]] + sum(log_B[z, w] for z, w in zip(path, x))
        s = s + sum(log_A[path[i - 1], path[i]] for i in range(1, len(x)))
        out[path] = s + (log_end[path[-1]] if log_end is not None else 0.0)
    return out


def test_forward_algorithm_and_lm_filtering_match_enumeration():
    torch.manual_seed(0)
    hmm = HMMLanguageModel(vocab_size=4, states=3).double()
    x = torch.tensor([[0, 2, 3, 1, 1], [3, 3, 0, 2, 1]])
    log_pi, log_A, log_B = hmm.tables()
    log_px = hmm.log_likelihood(x)
    logits, _ = hmm(x)  # (B, T, V): next-token log-probabilities
    for b in range(2):
        joint = _brute_joint(log_pi, log_A, log_B, x[b].tolist())
        brute = torch.logsumexp(torch.stack(list(joint.values())), 0)
        torch.testing.assert_close(log_px[b], brute)
        # the LM scores x_2..x_T given what came before: log p(x) - log p(x_1)
        scored = logits[b, :-1].gather(1, x[b, 1:, None]).sum()
        first = torch.logsumexp(log_pi + log_B[:, x[b, 0]], 0)
        torch.testing.assert_close(scored, brute - first)
    torch.testing.assert_close(logits.exp().sum(-1), torch.ones(2, 5, dtype=torch.float64))


def test_lm_state_carried_across_windows_equals_one_pass():
    torch.manual_seed(1)
    hmm = HMMLanguageModel(vocab_size=6, states=4)
    x = torch.randint(0, 6, (2, 9))
    whole, _ = hmm(x)
    first, state = hmm(x[:, :4])
    second, _ = hmm(x[:, 4:], state)
    torch.testing.assert_close(torch.cat([first, second], 1), whole)


def test_lm_prediction_step_stays_finite_and_exact_with_peaked_tables():
    """The matmul form of the prediction step against the plain logsumexp recursion, on tables so peaked
    (logits of std 20: probabilities down to e^-100) that an unshifted exp would underflow."""
    torch.manual_seed(2)
    hmm = HMMLanguageModel(vocab_size=7, states=5, init_std=20.0)
    x = torch.randint(0, 7, (3, 12))
    logits, _ = hmm(x)
    log_pi, log_A, log_B = hmm.tables()
    pred = log_pi.expand(3, -1)
    for t in range(12):
        f = pred + log_B[:, x[:, t]].T
        f = f - torch.logsumexp(f, 1, keepdim=True)
        pred = torch.logsumexp(f.unsqueeze(2) + log_A, 1)
        expected = torch.logsumexp(pred.unsqueeze(2) + log_B, 1)
        torch.testing.assert_close(logits[:, t], expected, atol=1e-3, rtol=1e-4)
    loss = -logits[:, :-1].gather(2, x[:, 1:, None]).mean()
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in hmm.parameters())


def _tagger():
    vocab = {"the": 0, "dog": 1, "runs": 2, "a": 3}
    hmm = HMMTagger(3, vocab, emission_smoothing=0.0, transition_smoothing=0.0)
    words = [["the", "dog", "runs"], ["a", "dog"]]
    tags = torch.tensor([[0, 1, 2], [0, 1, -100]])  # DET NOUN VERB / DET NOUN
    hmm.count(words, tags)
    hmm.fit()
    return hmm, words, tags


def test_supervised_tables_are_relative_frequencies():
    hmm, _, _ = _tagger()
    p = lambda t: t.exp().double()  # noqa: E731
    torch.testing.assert_close(p(hmm.log_start), torch.tensor([1.0, 0, 0], dtype=torch.float64))
    # NOUN -> VERB once, NOUN -> end once
    torch.testing.assert_close(p(hmm.log_trans[1]), torch.tensor([0, 0, 0.5], dtype=torch.float64))
    assert p(hmm.log_end[1]).item() == pytest.approx(0.5)
    # DET emitted "the" and "a" (both seen once, so both hapax): half the DET mass stays for new words
    assert p(hmm.log_emit[0, 0]).item() == pytest.approx(1 / 4)
    assert p(hmm.log_new[0]).item() == pytest.approx(2 / 4)


def test_viterbi_and_likelihood_match_enumeration_on_a_smoothed_tagger():
    vocab = {"the": 0, "dog": 1, "runs": 2}
    hmm = HMMTagger(3, vocab, emission_smoothing=0.5, transition_smoothing=0.5)
    hmm.count([["the", "dog", "runs"], ["the", "dog", "runs"], ["dog", "runs", "the"]],
              torch.tensor([[0, 1, 2], [0, 1, 2], [1, 2, 0]]))
    hmm.fit()
    words = [["the", "runs", "Zebra", "dog"]]  # one unseen word
    emissions = hmm.emissions(words, 4).double()
    mask = torch.ones(1, 4, dtype=torch.bool)
    path = hmm.decode(emissions, mask)[0].tolist()
    joint = {}
    for z in itertools.product(range(3), repeat=4):
        s = hmm.log_start[z[0]] + hmm.log_end[z[-1]] + sum(emissions[0, t, k] for t, k in enumerate(z))
        joint[z] = s + sum(hmm.log_trans[z[i - 1], z[i]] for i in range(1, 4))
    ranked = sorted(joint, key=lambda z: -joint[z].item())
    assert joint[ranked[0]] - joint[ranked[1]] > 1e-3  # a unique best path
    assert tuple(path) == ranked[0]
    brute = torch.logsumexp(torch.stack([v.double() for v in joint.values()]), 0)
    torch.testing.assert_close(hmm.log_likelihood(emissions, mask)[0], brute, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("task", ["classification", "image", "regression", "translation"])
def test_hmm_refuses_tasks_it_has_no_method_for(task):
    spec = TaskSpec(task=task, vocab_size=5, num_classes=2)
    with pytest.raises(ConfigError, match="supports lm, tagging"):
        HMMModel(spec, optimizer=partial(torch.optim.SGD, lr=0.1))


def test_hmm_param_count_is_the_size_of_its_tables():
    class Tok:
        vocab = type("V", (), {"stoi": {"a": 0, "b": 1}})()
        normalize = staticmethod(lambda w: w)

    model = HMMModel(TaskSpec(task="tagging", vocab_size=2, num_classes=3, tokenizer=Tok()),
                     optimizer=partial(torch.optim.SGD, lr=0.1))
    assert model.num_params() == 3 + 9 + 3 + 3 * 2 + 3 + 3 * 8 + 3 * 512


def test_hmm_language_model_trains_through_its_lightning_module(tmp_path, seed, record_property):
    """`model=hmm` on PTB through `seqbench.training.run.train` (the README's HMM row): the tables are stepped by
    the optimizer over the carried stream, and 8 Adam steps (rate 0.3) bring validation perplexity far
    under the uniform guess's 10,000 (~1,600 measured; the unigram's is ~700). ~10 s."""
    from conftest import TINY, compose_cfg
    from seqbench.training.run import train

    cfg = compose_cfg([*TINY, "model=hmm", "model.states=16", "model.optimizer.lr=0.3", "data.batch_size=8", "data.bptt=32",
                       "trainer.limit_train_batches=8", "trainer.limit_val_batches=8", f"seed={seed}"], tmp_path)
    metrics = train(cfg, tmp_path)
    assert metrics["status"] == "completed" and metrics["params"] == 16 + 16 * 16 + 16 * 10_000
    record_property("learned", float(metrics["val/ppl"]))
    assert metrics["val/ppl"] < 3_000, metrics["val/ppl"]
