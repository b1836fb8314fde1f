"""Hidden Markov models, the statistical baseline: a supervised tagger and a language model.

An HMM with K hidden states has start probabilities pi (K), transitions A (K, K), an end
probability f (K) and emissions B (K, V): p(x, z) = pi[z_1] B[z_1, x_1] prod_t A[z_{t-1}, z_t]
B[z_t, x_t] f[z_T]. With log probabilities as scores this is a linear chain, so the forward
algorithm (p(x) = sum over all z) and Viterbi (argmax_z p(z | x)) are the CRF's recursions in log
space (`seqbench.nn.crf`); only where the numbers come from differs — counts here, gradients there.

* `HMMTagger` (supervised, Rabiner 1989; Brants 2000 for unknown words): tags are the states, so
  every table is a relative frequency of the training counts, add-alpha smoothed. A word never
  seen in training gets p(w | t) = p(new word | t) p(shape | t) p(suffix | t), estimated from the
  training words seen once (hapax legomena behave like unseen words: Baayen & Sproat 1996).
* `HMMLanguageModel` (unsupervised): K latent states, parameters as softmax-normalised logits,
  trained by gradient ascent on the marginal likelihood. It predicts the next token from the
  filtered state distribution, p(x_{t+1} | x_<=t) = sum_k p(z_{t+1} = k | x_<=t) B[k, x_{t+1}],
  which is the normalised forward recursion; the filtered distribution is the HMM's "hidden
  state" and is carried across truncated-BPTT windows like an RNN's.
"""

from __future__ import annotations

import zlib

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqbench.nn.crf import chain_log_partition, chain_score, chain_viterbi

SHAPES = ("lower", "capitalized", "upper", "digit", "has_digit", "hyphen", "punct", "other")
SUFFIX_BUCKETS = 512


def word_shape(word: str) -> int:
    if word.isdigit() or word.replace(",", "").replace(".", "").isdigit():
        return SHAPES.index("digit")
    if any(c.isdigit() for c in word):
        return SHAPES.index("has_digit")
    if "-" in word:
        return SHAPES.index("hyphen")
    if not any(c.isalnum() for c in word):
        return SHAPES.index("punct")
    if word.isupper():
        return SHAPES.index("upper")
    if word[:1].isupper():
        return SHAPES.index("capitalized")
    if word.islower():
        return SHAPES.index("lower")
    return SHAPES.index("other")


def suffix_bucket(word: str, length: int = 3) -> int:
    """The last `length` letters, lowercased, hashed to a fixed number of buckets (stable across runs)."""
    return zlib.crc32(word[-length:].lower().encode("utf-8")) % SUFFIX_BUCKETS


class HMMTagger(nn.Module):
    """Counts in, log-probability tables out; `nll` and `decode` follow the CRF's interface."""

    def __init__(self, num_tags: int, vocab: dict[str, int], normalize=lambda w: w,
                 emission_smoothing: float = 0.1, transition_smoothing: float = 1.0) -> None:
        super().__init__()
        K, V = num_tags, len(vocab)
        self.vocab, self.normalize = vocab, normalize
        self.alpha, self.beta = emission_smoothing, transition_smoothing
        for name, shape in [("start_counts", (K,)), ("trans_counts", (K, K)), ("end_counts", (K,)),
                            ("emit_counts", (K, V))]:
            self.register_buffer(name, torch.zeros(shape, dtype=torch.float64))
        for name, shape in [("log_start", (K,)), ("log_trans", (K, K)), ("log_end", (K,)), ("log_emit", (K, V)),
                            ("log_new", (K,)), ("log_shape", (K, len(SHAPES))), ("log_suffix", (K, SUFFIX_BUCKETS))]:
            self.register_buffer(name, torch.zeros(shape))
        words = sorted(vocab, key=vocab.get)
        self.register_buffer("vocab_shape", torch.tensor([word_shape(w) for w in words]), persistent=False)
        self.register_buffer("vocab_suffix", torch.tensor([suffix_bucket(w) for w in words]), persistent=False)

    def count(self, words: list[list[str]], tags: Tensor) -> None:
        """Add one batch of tagged sentences (tags (B, T), ids) to the counts."""
        for row, sentence in zip(tags.tolist(), words):
            ids = [self.vocab.get(self.normalize(w)) for w in sentence]
            row = row[: len(sentence)]
            self.start_counts[row[0]] += 1
            self.end_counts[row[-1]] += 1
            for prev, cur in zip(row, row[1:]):
                self.trans_counts[prev, cur] += 1
            for tag, i in zip(row, ids):
                if i is not None:
                    self.emit_counts[tag, i] += 1

    @torch.no_grad()
    def fit(self) -> None:
        """Relative frequencies of the counts, add-alpha (emissions) / add-beta (transitions) smoothed."""
        K, V = self.emit_counts.shape
        b = self.beta
        self.log_start.copy_(((self.start_counts + b) / (self.start_counts.sum() + b * K)).log())
        # each state's next step is one of K states or the end
        out = self.trans_counts.sum(1) + self.end_counts + b * (K + 1)  # (K,)
        self.log_trans.copy_(((self.trans_counts + b) / out[:, None]).log())
        self.log_end.copy_(((self.end_counts + b) / out).log())
        per_tag = self.emit_counts.sum(1, keepdim=True)  # (K, 1)
        hapax = (self.emit_counts.sum(0) == 1).double()  # (V,) words seen once
        new = self.emit_counts @ hapax  # (K,) hapax tokens per tag: how often a tag emits a new word
        a = self.alpha
        self.log_emit.copy_(((self.emit_counts + a) / (per_tag + a * V + new[:, None] + a)).log())
        self.log_new.copy_(((new + a) / (per_tag.squeeze(1) + a * V + new + a)).log())
        hapax_counts = self.emit_counts * hapax  # (K, V)
        shape = torch.zeros(K, len(SHAPES), dtype=torch.float64).index_add_(1, self.vocab_shape, hapax_counts)
        suffix = torch.zeros(K, SUFFIX_BUCKETS, dtype=torch.float64).index_add_(1, self.vocab_suffix, hapax_counts)
        self.log_shape.copy_(((shape + a) / (new[:, None] + a * len(SHAPES))).log())
        self.log_suffix.copy_(((suffix + a) / (new[:, None] + a * SUFFIX_BUCKETS)).log())

    def emissions(self, words: list[list[str]], T: int) -> Tensor:
        """log p(word | tag) for every position: (B, T, K); padding positions get 0."""
        K = self.log_emit.size(0)
        out = self.log_emit.new_zeros(len(words), T, K)
        for b, sentence in enumerate(words):
            for t, w in enumerate(sentence):
                i = self.vocab.get(self.normalize(w))
                if i is not None:
                    out[b, t] = self.log_emit[:, i]
                else:
                    out[b, t] = self.log_new + self.log_shape[:, word_shape(w)] + self.log_suffix[:, suffix_bucket(w)]
        return out

    def nll(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """-log p(words, tags) per scored token (the joint likelihood the counts maximise)."""
        joint = chain_score(emissions, tags, self.log_trans, self.log_start, self.log_end, mask)
        return -joint.sum() / mask.sum().clamp_min(1)

    def decode(self, emissions: Tensor, mask: Tensor) -> Tensor:
        return chain_viterbi(emissions, self.log_trans, self.log_start, self.log_end, mask)[0]

    def log_likelihood(self, emissions: Tensor, mask: Tensor) -> Tensor:
        """log p(words) (B,) by the forward algorithm."""
        return chain_log_partition(emissions, self.log_trans, self.log_start, self.log_end, mask)


class HMMLanguageModel(nn.Module):
    def __init__(self, vocab_size: int, states: int = 64, init_std: float = 1.0) -> None:
        super().__init__()
        self.start_logits = nn.Parameter(torch.randn(states) * init_std)
        self.trans_logits = nn.Parameter(torch.randn(states, states) * init_std)
        self.emit_logits = nn.Parameter(torch.randn(states, vocab_size) * init_std)

    def tables(self) -> tuple[Tensor, Tensor, Tensor]:
        return (F.log_softmax(self.start_logits, 0), F.log_softmax(self.trans_logits, 1),
                F.log_softmax(self.emit_logits, 1))

    def forward(self, tokens: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """tokens (B, T) -> next-token log-probabilities (B, T, V) and the carried state: log p(z | x so
        far) of the state that will emit the next token, (B, K). `state=None` starts a stream at pi."""
        log_pi, log_A, log_B = self.tables()
        B, T = tokens.shape
        pred = log_pi.expand(B, -1) if state is None else state  # (B, K)
        # The prediction step log sum_k exp(f_k + log A_kj) as a matmul in probability space, shifted by
        # each row's max of f and each column's max of log A so that exp stays in range: a (B, K) @ (K, K)
        # product instead of a logsumexp over a (B, K, K) tensor, ~5x faster at K = 256 on a CPU. A sum
        # that still underflows (a state no likely state can reach) is floored at 1e-30, not log 0.
        col = log_A.amax(0, keepdim=True)  # (1, K)
        A = (log_A - col).exp()  # (K, K), each column's max is 1
        preds = []
        for t in range(T):
            filtered = pred + log_B[:, tokens[:, t]].T  # (B, K): log p(z_t, x_t | x_<t)
            filtered = filtered - torch.logsumexp(filtered, 1, keepdim=True)  # log p(z_t | x_<=t)
            m = filtered.amax(1, keepdim=True)  # (B, 1)
            pred = ((filtered - m).exp() @ A).clamp_min(1e-30).log() + m + col  # (B, K)
            preds.append(pred)
        P = torch.stack(preds, 1)  # (B, T, K) log p(z_{t+1} | x_<=t)
        # log sum_k exp(P[k] + log_B[k, v]) as a matmul: shift by the max so exp stays in range
        m = P.amax(-1, keepdim=True)  # (B, T, 1)
        logits = torch.log((P - m).exp() @ log_B.exp()) + m  # (B, T, K) @ (K, V) -> (B, T, V)
        return logits, pred

    def log_likelihood(self, tokens: Tensor) -> Tensor:
        """log p(x_1..x_T) (B,) by the forward algorithm (the LM scores all but the first token)."""
        log_pi, log_A, log_B = self.tables()
        emissions = log_B[:, tokens].permute(1, 2, 0)  # (K, B, T) -> (B, T, K)
        return chain_log_partition(emissions, log_A, log_pi, torch.zeros_like(log_pi))
