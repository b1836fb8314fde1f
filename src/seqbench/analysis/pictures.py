"""Pictures of what attention models compute: the sinusoidal position table and attention maps.

    python -m seqbench.analysis.pictures positions --out experiments/figures/pictures
    python -m seqbench.analysis.pictures attention --runs outputs/multiruns/<time> --T 50 --out ...

`positions`: the sinusoidal encoding (Vaswani et al. 2017, §3.5) as a heatmap, positions x
dimensions: fast sines in the first dimensions, slow ones in the last, and beside it the dot
product PE(i)·PE(j), which depends only on |i - j| and falls off with it — the property the paper
hoped would let attention find relative positions.

`attention`: the attention probabilities of a trained model (a job of `experiment=long_range`) on
copy-memory inputs, one panel per layer and head. They are recomputed from each block's own
projections, softmax(Q Kᵀ / √d_k) with the block's masks (`attention_probs`), because the fast path
(`F.scaled_dot_product_attention`) never materialises them; the tests check that the recomputed
probabilities times V reproduce the block's output. On copy memory a model that solved the task
shows, at every answer position, one sharp weight on the symbol it copies.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch
from torch import Tensor, nn

from seqbench.analysis.gradient_flow import build_family, trained_checkpoints
from seqbench.checkpoints import load_weights
from seqbench.entry import run_command
from seqbench.nn.attention import MultiHeadAttention, attention_mask
from seqbench.nn.positions import sinusoidal_table
from seqbench.training.loggers import resolve_mode


def self_attention_layers(model: nn.Module) -> list[MultiHeadAttention]:
    return [m for m in model.modules() if isinstance(m, MultiHeadAttention) and not m.cross]


def probs_from_projections(attn: MultiHeadAttention, x: Tensor, causal: bool = False,
                           key_padding_mask: Tensor | None = None) -> Tensor:
    """softmax(Q Kᵀ/√d_k) of a self-attention layer on its input x (B, T, C) -> (B, nh, T, T)."""
    B, T, C = x.shape
    hs = C // attn.n_head
    q, k, _ = attn.qkv_proj(x).split(C, dim=2)  # (B, T, C) each
    q = q.view(B, T, attn.n_head, hs).transpose(1, 2)  # (B, T, C) -> (B, nh, T, hs)
    k = k.view(B, T, attn.n_head, hs).transpose(1, 2)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, nh, T, T)
    allowed = attention_mask(T, T, causal, key_padding_mask, x.device)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(-1).nan_to_num(0.0)  # a query with no allowed key: zeros, as SDPA returns


@torch.no_grad()
def attention_probs(model: nn.Module, run) -> list[Tensor]:
    """Per self-attention layer, in order, its probabilities (B, nh, T, T) while `run()` executes."""
    layers = self_attention_layers(model)
    seen: dict[int, tuple] = {}

    def record(module, args, kwargs):
        seen[id(module)] = (args[0], kwargs.get("causal", False), kwargs.get("key_padding_mask"))

    handles = [layer.register_forward_pre_hook(record, with_kwargs=True) for layer in layers]
    try:
        run()
    finally:
        for h in handles:
            h.remove()
    return [probs_from_projections(layer, *seen[id(layer)]) for layer in layers if id(layer) in seen]


# -- figures ------------------------------------------------------------------------------------
def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_positions(path: Path, length: int = 128, d_model: int = 64) -> Path:
    plt = _plt()
    table = sinusoidal_table(length, d_model)  # (L, d)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    im = left.imshow(table.numpy(), aspect="auto", cmap="RdBu", vmin=-1, vmax=1, interpolation="nearest")
    left.set_xlabel("dimension (even: sin, odd: cos)")
    left.set_ylabel("position")
    left.set_title(f"sinusoidal encoding, {length} positions x d_model {d_model}", fontsize=10)
    fig.colorbar(im, ax=left)
    similarity = table @ table.T  # (L, L): PE(i) . PE(j), a function of |i - j|
    im = right.imshow(similarity.numpy(), cmap="viridis", interpolation="nearest")
    right.set_xlabel("position j")
    right.set_ylabel("position i")
    right.set_title("PE(i) · PE(j)", fontsize=10)
    fig.colorbar(im, ax=right)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_attention(probs: list[Tensor], path: Path, title: str, example: int = 0) -> Path:
    """A grid of layers (rows) x heads (columns) of one example's (T, T) maps."""
    plt = _plt()
    n_layer, n_head = len(probs), probs[0].size(1)
    fig, axes = plt.subplots(n_layer, n_head, figsize=(2.6 * n_head, 2.6 * n_layer), squeeze=False)
    for layer, p in enumerate(probs):
        for head in range(n_head):
            ax = axes[layer][head]
            ax.imshow(p[example, head].numpy(), cmap="magma", vmin=0, vmax=1, interpolation="nearest")
            ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
    axes[-1][0].set_xlabel("key position")
    axes[-1][0].set_ylabel("query position")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def attention_pictures(runs: Path | list[Path], T: int, families: list[str], out: Path) -> dict[str, Path]:
    checkpoints = trained_checkpoints(runs, T)
    paths = {}
    for family in families:
        if family not in checkpoints:
            print(f"no finished {family} job at T={T} under {runs}; skipped", file=sys.stderr)
            continue
        datamodule, model = build_family(family, T)
        load_weights(model, checkpoints[family])
        model.eval()
        batch = {k: v[:4] for k, v in datamodule.fixed["val"].items()}
        probs = attention_probs(model, lambda: model.tag(batch))
        paths[family] = plot_attention(probs, out / f"attention_{family}_T{T}.png",
                                       f"{family} trained on copy memory, T = {T}: one validation example")
    return paths


def log_images(paths: dict[str, Path], mode: str, project: str) -> None:
    resolved = "disabled" if mode == "disabled" else resolve_mode(mode)
    if resolved == "disabled" or (mode == "auto" and resolved != "online") or not paths:
        return
    import wandb

    Path("outputs").mkdir(exist_ok=True)  # the run's files stay with the other runs, not beside the figures
    run = wandb.init(project=project, job_type="analysis", name="pictures", mode=resolved, dir="outputs")
    run.log({f"pictures/{k}": wandb.Image(str(p)) for k, p in paths.items()})
    run.finish()


def main(argv: list[str] | None = None) -> dict[str, Path]:
    parser = argparse.ArgumentParser(prog="python -m seqbench.analysis.pictures", description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["positions", "attention"])
    parser.add_argument("--out", type=Path, default=Path("outputs/analysis/pictures"))
    parser.add_argument("--runs", type=Path, nargs="+", help="attention: long_range multirun directories")
    parser.add_argument("--T", type=int, default=50)
    parser.add_argument("--families", nargs="+", default=["transformer", "gpt"])
    parser.add_argument("--wandb", default="auto", choices=["auto", "online", "offline", "disabled"])
    parser.add_argument("--wandb-project", default="seqbench")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.what == "positions":
        paths = {"positions": plot_positions(args.out / "sinusoidal_positions.png")}
    else:
        if args.runs is None:
            parser.error("attention maps need --runs <a long_range multirun directory>")
        paths = attention_pictures(args.runs, args.T, args.families, args.out)
    for name, path in paths.items():
        print(f"wrote {path}")
    log_images(paths, args.wandb, args.wandb_project)
    return paths


if __name__ == "__main__":
    run_command(main, sys.argv[1:])
