"""Synthetic long-range probes: copy memory, selective copying, the adding problem, associative recall.

Each generator is a pure function of a `torch.Generator`, returns a whole batch as a dict in the
shape its task reads (`seqbench.tasks`), and comes with the loss and accuracy of the trivial
predictor, so a curve can be read against the line a model that learned nothing would draw.

Copy memory (Hochreiter & Schmidhuber 1997, §5.2; in the form of Arjovsky et al. 2016, §4.1), a
`tagging` task. With `copy_length` 3, gap T = 6, symbols 1..K, blank 0 and delimiter K+1 = ":":

    input   a b c . . . . . : . . .        length copy_length + T + copy_length
    tags    - - - - - - - - - a b c        "-" = IGNORE_INDEX: only the answers are scored

The delimiter stands T - 1 blanks after the last symbol, so symbol i must be held for T + copy_length
steps. Only the answer positions are scored: the trivial predictor (uniform over the K symbols) has
cross-entropy log K and accuracy 1/K. (Arjovsky et al. score every position, which hides the
baseline under the easy blanks: 10 log 8 / (T + 20).)

Selective copying (Gu & Dao 2023, "Mamba", §3.1 and §4.1.1, Fig. 2; the generator of the S4
repository's `torch_copying_data` with `variable=True`), a `tagging` task: `num_data` symbols of
1..K scattered at random positions, kept in order, among T blanks, then `num_data` markers K+1 at which
the symbols must be output in their order. With 3 data tokens, T = 5, and "?" the marker:

    input   . a . . b . c .  ? ? ?        length T + 2 num_data
    tags    - - - - - - - -  a b c        only the answers are scored

Copy memory's symbols stand at fixed positions, so a time-invariant filter (a convolution) can fetch
them; here the distance from a symbol to its answer changes with every example, so the model must
decide by content what to keep, which is what an input-dependent (selective) state update does and a
linear time-invariant one (S4) cannot (the paper's Table 1: S4 18.3 %, Mamba 99.8 %). The trivial
predictor, uniform over the K symbols, and the one that always names the most frequent symbol both
score accuracy 1/K (the symbols are uniform), cross-entropy log K. The line a model first reaches is
sharper: one that keeps which symbols occurred but not where, predicting each with its count among the
`num_data`, scores exactly what recall's value-frequency plateau does with `num_data` pairs over K
values (`selective_copy_baseline`: accuracy 0.192, 2.224 nats at 16 of 16).

Adding (Hochreiter & Schmidhuber 1997, §5.4; Le et al. 2015), a `regression` task on feature
vectors (B, T, 2): channel 0 a value ~ U(0, 1), channel 1 a marker that is 1 at exactly two
positions, one in each half of the sequence; the target is the sum of the two marked values.
Predicting the mean (1.0) gives MSE = Var(U1 + U2) = 1/12 + 1/12 = 1/6.

Associative recall (Ba et al. 2016, "fast weights", §4.1), a `classification` task. `num_pairs`
distinct keys each followed by a value, T blanks, a query marker and one of the keys; the label is
that key's value (0 .. num_values-1). Keys are tokens 1 .. num_keys, values the next num_values
tokens, then the query marker; 0 is the blank. With 3 pairs and T = 2:

    input   k2 v7 k5 v1 k9 v7 . . ? k5        label 1

The trivial predictor (uniform over the values) has cross-entropy log(num_values), accuracy
1/num_values. A model that only counted which values occur in the sequence, ignoring the query,
does better: predicting each value in proportion to its count among the pairs scores, exactly,
accuracy E[max count] / num_pairs and cross-entropy E[entropy of the counts]
(`recall_frequency_baseline`: 0.325 and 1.557 nats at 8 pairs over 8 values). That is the plateau
every family of experiments/long-range.md first reaches; the probe's point is the jump from it to ~1
when the query key is looked up.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from seqbench.data.streams import IGNORE_INDEX


def copy_memory(n: int, T: int, num_symbols: int = 8, copy_length: int = 10,
                generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """n copy-memory examples: input (n, L) token ids, tags (n, L), L = 2 copy_length + T."""
    if T < 1:
        raise ValueError(f"the copy gap T must be at least 1, got {T}")
    L = 2 * copy_length + T
    symbols = torch.randint(1, num_symbols + 1, (n, copy_length), generator=generator)  # (n, c)
    x = torch.zeros(n, L, dtype=torch.long)
    x[:, :copy_length] = symbols
    x[:, copy_length + T - 1] = num_symbols + 1  # the delimiter, T - 1 blanks after the last symbol
    tags = torch.full((n, L), IGNORE_INDEX, dtype=torch.long)
    tags[:, -copy_length:] = symbols
    return {"input": x, "tags": tags}


def copy_memory_baseline(num_symbols: int) -> dict[str, float]:
    return {"loss": math.log(num_symbols), "acc": 1.0 / num_symbols}


def selective_copy(n: int, T: int, num_symbols: int = 16, num_data: int = 16,
                   generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """n selective-copying examples: input (n, L) token ids, tags (n, L), L = T + 2 num_data; the data
    tokens stand at `num_data` distinct positions, uniform among the first T + num_data."""
    if T < 0:
        raise ValueError(f"the number of blanks T must be >= 0, got {T}")
    region = T + num_data
    symbols = torch.randint(1, num_symbols + 1, (n, num_data), generator=generator)  # (n, k)
    positions = torch.rand(n, region, generator=generator).argsort(dim=1)[:, :num_data].sort(dim=1).values
    x = torch.zeros(n, region + num_data, dtype=torch.long)
    x.scatter_(1, positions, symbols)  # in order: the i-th data position holds the i-th symbol
    x[:, region:] = num_symbols + 1  # the markers: answer here
    tags = torch.full_like(x, IGNORE_INDEX)
    tags[:, region:] = symbols
    return {"input": x, "tags": tags}


def selective_copy_baseline(num_symbols: int, num_data: int) -> dict[str, float]:
    """The uniform guess (= the most frequent symbol's accuracy, the symbols being uniform) and the
    plateau of a model that knows which symbols occurred but not in what order."""
    acc, loss = _frequency_baseline(num_data, num_symbols)
    return {"loss": math.log(num_symbols), "acc": 1.0 / num_symbols, "frequency_loss": loss, "frequency_acc": acc}


def adding(n: int, T: int, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """n adding-problem examples: input (n, T, 2) float features, target (n,)."""
    if T < 2:
        raise ValueError(f"the adding problem needs T >= 2 positions, got {T}")
    values = torch.rand(n, T, generator=generator)  # (n, T)
    half = T // 2
    first = torch.randint(0, half, (n,), generator=generator)  # one mark in each half
    second = torch.randint(half, T, (n,), generator=generator)
    marks = torch.zeros(n, T)
    rows = torch.arange(n)
    marks[rows, first] = 1.0
    marks[rows, second] = 1.0
    target = values[rows, first] + values[rows, second]  # (n,)
    return {"input": torch.stack([values, marks], dim=-1), "target": target}  # (n, T, 2)


def adding_baseline() -> dict[str, float]:
    return {"loss": 1.0 / 6.0}  # MSE of predicting E[sum] = 1: Var(U1) + Var(U2) = 2 / 12


def recall(n: int, T: int, num_pairs: int = 8, num_keys: int = 16, num_values: int = 8,
           generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
    """n associative-recall examples: input (n, 2 num_pairs + T + 2) token ids, label (n,)."""
    if num_pairs > num_keys:
        raise ValueError(f"num_pairs={num_pairs} distinct keys cannot be drawn from num_keys={num_keys}")
    if T < 0:
        raise ValueError(f"the recall gap T must be >= 0, got {T}")
    keys = torch.rand(n, num_keys, generator=generator).argsort(dim=1)[:, :num_pairs] + 1  # (n, P) distinct
    values = torch.randint(0, num_values, (n, num_pairs), generator=generator)  # (n, P)
    which = torch.randint(0, num_pairs, (n,), generator=generator)  # the queried pair
    rows = torch.arange(n)
    L = 2 * num_pairs + T + 2
    x = torch.zeros(n, L, dtype=torch.long)
    x[:, 0 : 2 * num_pairs : 2] = keys
    x[:, 1 : 2 * num_pairs : 2] = values + num_keys + 1
    x[:, -2] = num_keys + num_values + 1  # the query marker
    x[:, -1] = keys[rows, which]
    return {"input": x, "label": values[rows, which]}


def recall_baseline(num_values: int) -> dict[str, float]:
    return {"loss": math.log(num_values), "acc": 1.0 / num_values}


def recall_frequency_baseline(num_pairs: int, num_values: int) -> dict[str, float]:
    """Accuracy and cross-entropy of the predictor that ignores the query and predicts each value with
    its frequency among the pairs: the plateau of a model that has not yet learned to look a key up.
    With c_1..c_V the value counts of the P pairs (multinomial), accuracy is E[max c] / P (the label is
    a uniformly chosen pair's value) and loss E[-sum_v (c_v/P) log(c_v/P)]; both exact."""
    acc, loss = _frequency_baseline(num_pairs, num_values)
    return {"frequency_loss": loss, "frequency_acc": acc}


@functools.lru_cache(maxsize=None)
def _frequency_baseline(P: int, V: int) -> tuple[float, float]:
    """(accuracy, loss) in O(P^2 V) rather than by listing the C(P+V-1, V-1) count vectors (300 million
    at 16 pairs over 16 values). Cached: a data module's `spec` asks for it more than once.
    - loss, by linearity: V times one value's term, whose count is Binomial(P, 1/V);
    - E[max c] = sum_{m<P} P(max c > m), with P(max c <= m) = P!/V^P [x^P] (sum_{k<=m} x^k/k!)^V
      (the exponential generating function of count vectors bounded by m)."""
    binom = [math.comb(P, k) * (1 / V) ** k * (1 - 1 / V) ** (P - k) for k in range(P + 1)]
    loss = V * sum(p * -(k / P) * math.log(k / P) for k, p in enumerate(binom) if k)
    scale = math.exp(math.lgamma(P + 1) - P * math.log(V))  # P! / V^P
    inv_fact = np.array([1 / math.factorial(k) for k in range(P + 1)])
    e_max = 0.0
    for m in range(P):
        bounded = np.where(np.arange(P + 1) <= m, inv_fact, 0.0)
        power = np.zeros(P + 1)
        power[0] = 1.0
        for _ in range(V):
            power = np.convolve(power, bounded)[: P + 1]
        e_max += 1.0 - scale * power[P]
    return float(e_max) / P, loss
