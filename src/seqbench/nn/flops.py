"""Training FLOPs per token of each language-model family: the formulas, written once.

One convention for every family, so that a compute budget means the same thing for all of them:

- **Matmuls only.** A matrix-vector product with an m x n weight costs 2·m·n FLOPs (a multiply and an
  add per weight). Biases, gates' elementwise nonlinearities, LayerNorm, softmax and the loss are
  left out: they are O(d) per token against the matmuls' O(d²) (Kaplan et al. 2020, §2.1, leave
  them out too).
- **Embeddings are lookups and count 0**; a table tied to the output layer is counted there once,
  as the output projection's matmul (d x V).
- **Training = 3 x forward**: the backward pass computes, for every matmul, the gradient of its
  input and of its weight, each as costly as the forward product (Kaplan et al. 2020; PaLM,
  Chowdhery et al. 2022, appendix B).
- **Attention's context term** is counted at the window length T the model trains on: per layer and
  token, QKᵀ costs 2·T·d and AV 2·T·d, so 4·T·d forward, 12·T·d for training (PaLM's 12·L·H·Q·T).
  It is **not halved for the causal mask**: the kernels seqbench runs on CPU (the written-out
  softmax(QKᵀ)V and SDPA's math path) compute the whole T x T score matrix and then mask it, and
  `torch.utils.flop_counter.FlopCounterMode` counts it so (a flash kernel that skips masked blocks
  would do about half of it: the count is then an upper bound).

Recurrent cells (g gates: 1 Elman, 3 GRU, 4 LSTM), per layer and token, forward:
    input-to-hidden 2·g·H·I  +  hidden-to-hidden 2·g·H·H          (I = E for layer 1, H above)
Attention blocks (d = d_model, f = d_ff), per layer and token, forward:
    QKV 6·d²  +  output projection 2·d²  +  FFN 4·d·f  +  QKᵀ and AV 4·T·d
Parallel recurrences (d = d_model), per layer and token, forward (`parallel_recurrent_train_flops`):
    minGRU 2·2·d², minLSTM 2·3·d² (the input projection to the gates; the scan is elementwise)
    SSM (E = expand·d, N = d_state, R = dt_rank, k = d_conv): in_proj 4·d·E + x_proj 2·E·(R + 2N)
        + dt_proj 2·R·E + out_proj 2·E·d + the depthwise conv 2·E·k, all 3x for training; and the
        selective scan's contractions, 8·E·N for training: the readout C·h (2·E·N forward, 2·E·N for
        C's gradient) and the injection Δu ⊗ B, an outer product (elementwise) whose backward
        contracts twice (Δu's and B's gradients, 2·E·N each). On this count the scan is not 3x a forward.
    SSD, Mamba-2 (E = expand·d, N = d_state, P = headdim, H = E / P heads, G = 1 group, k = d_conv,
        Q = min(chunk, T) the chunk length): in_proj 2·d·(2E + 2GN + H) + the depthwise conv over x, B, C
        2·(E + 2GN)·k + out_proj 2·E·d; the chunked SSD's matmuls, C Bᵀ in a chunk 2·Q·G·N, its product
        with X 2·Q·E, the chunk states 2·E·N and their read-out 2·E·N, all 3x for training (each matmul's
        backward is two of its size), and times T'/T where T' is T padded up to whole chunks.
Both, once per token: the output projection to the vocabulary, 2·d·V (d = H for a recurrent LM).

`tests/test_flops.py` checks each family's number against FlopCounterMode on one training step.
"""

from __future__ import annotations

from seqbench.nn.cells import GATES  # gate blocks per cell: 1 Elman, 3 GRU, 4 LSTM

TRAIN_MULTIPLIER = 3  # forward + backward (twice the forward)


def recurrent_forward_flops(cell: str, input_size: int, hidden_size: int | list[int], num_layers: int,
                            vocab_size: int) -> int:
    """Forward FLOPs per token of a stacked recurrent LM: the gate matmuls and the output projection.
    `hidden_size` may list each layer's width (AWD-LSTM's last layer is as wide as the embedding)."""
    g = GATES[cell]
    sizes = list(hidden_size) if isinstance(hidden_size, (list, tuple)) else [hidden_size] * num_layers
    flops, inputs = 0, input_size
    for size in sizes:
        flops += 2 * g * size * (inputs + size)
        inputs = size
    return flops + 2 * sizes[-1] * vocab_size


def attention_forward_flops(n_layer: int, d_model: int, d_ff: int, context: int, vocab_size: int) -> int:
    """Forward FLOPs per token of a decoder-only stack reading windows of `context` tokens."""
    per_layer = 8 * d_model**2 + 4 * d_model * d_ff + 4 * context * d_model
    return n_layer * per_layer + 2 * d_model * vocab_size


def train_flops(forward_flops_per_token: float) -> float:
    """Forward + backward FLOPs per token from the forward count."""
    return TRAIN_MULTIPLIER * forward_flops_per_token


def parallel_recurrent_train_flops(layer: str, d_model: int, num_layers: int, vocab_size: int,
                                   d_state: int = 16, expand: int = 2, d_conv: int = 4,
                                   dt_rank: int | None = None, headdim: int = 64, chunk: int = 64,
                                   length: int | None = None) -> float:
    """Training FLOPs per token of a minGRU / minLSTM / selective-SSM / SSD language model (the header's
    terms). `dt_rank` None: Mamba's ceil(d / 16), as `seqbench.nn.ssm.SelectiveSSM` sets it. SSD only:
    `headdim`, `chunk` (`seqbench.nn.ssd.SSD`'s) and the window `length` (None: whole chunks)."""
    d = d_model
    if layer in ("mingru", "minlstm"):
        per_layer, scan = 2 * (2 if layer == "mingru" else 3) * d * d, 0
    elif layer == "ssm":
        E, N, R = expand * d, d_state, dt_rank or -(-d // 16)
        per_layer = 4 * d * E + 2 * E * (R + 2 * N) + 2 * R * E + 2 * E * d + 2 * E * d_conv
        scan = 8 * E * N
    elif layer == "ssd":
        E, N, G = expand * d, d_state, 1
        H = E // headdim
        Q = chunk if length is None else min(chunk, length)
        padded = 1.0 if length is None else -(-length // Q) * Q / length  # T' / T
        chunks = 2 * Q * G * N + 2 * Q * E + 4 * E * N  # C Bᵀ, its product with X, the states, their read-out
        per_layer = 2 * d * (2 * E + 2 * G * N + H) + 2 * (E + 2 * G * N) * d_conv + 2 * E * d + chunks * padded
        scan = 0
    else:
        raise ValueError(f"no FLOPs formula for the layer {layer!r}")
    return TRAIN_MULTIPLIER * (num_layers * per_layer + 2 * d * vocab_size) + num_layers * scan
