"""What a trained ViT looks at: attention rollout, position-embedding similarity, patch-embedding filters.

    python -m seqbench.analysis.vit_pictures outputs/runs/<run>/checkpoints/best-epoch019.ckpt \
        --out experiments/figures/images [--images 8] [--wandb-project seqbench]

Three pictures, each after a figure of Dosovitskiy et al. (2021):

* **Attention rollout** (Abnar & Zuidema 2020; the ViT paper's Fig. 6). Attention weights of one
  layer say where each token reads from, but the residual stream carries each token on as well, and
  layers compose. Rollout models both: per layer the head-averaged weights A are mixed with the
  identity, Â = (A + I) / 2 (rows renormalised to 1), and the layers multiplied,
  R = Â_L ··· Â_1. R is row-stochastic (every row sums to 1): R[0, j] is how much of the [CLS]
  state at the top traces back to input token j. The map over the patch grid is R[0, 1:], which
  sums to 1 - R[0, 0].
* **Position-embedding similarity** (Fig. 7, centre): the cosine similarity of the learned position
  embedding of each patch with those of all others, one small grid per patch, in the patch layout.
  Nearby patches come out similar, and rows and columns show up, although nothing told the model the
  patches lie on a 2-D grid.
* **Patch-embedding filters** (Fig. 7, left): the principal components of the first layer's
  filters E (D filters of C x P x P pixels), which resemble the basis functions of a low-dimensional
  code for each patch.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
from torch import Tensor

from seqbench.checkpoints import load_checkpoint
from seqbench.data.cifar10 import CIFAR10DataModule
from seqbench.data.mnist import MNISTDataModule
from seqbench.entry import run_command
from seqbench.errors import UserError
from seqbench.models.vit import ViTModel
from seqbench.nn.vit import VisionTransformer


# -- the quantities (pure torch, tested) ---------------------------------------------------------
def attention_rollout(weights: list[Tensor], residual: bool = True) -> Tensor:
    """Per-layer attention (B, nh, T, T), first to last -> rollout (B, T, T), every row summing to 1."""
    rollout = None
    for w in weights:
        a = w.mean(1)  # (B, nh, T, T) -> (B, T, T): heads averaged
        if residual:
            a = 0.5 * a + 0.5 * torch.eye(a.size(-1), device=a.device)
        a = a / a.sum(-1, keepdim=True)
        rollout = a if rollout is None else a @ rollout  # Â_l (Â_{l-1} ... Â_1)
    return rollout


@torch.no_grad()
def record_attention(net: VisionTransformer, images: Tensor) -> list[Tensor]:
    """Run `net` on images (B, C, H, W) and return each block's attention (B, nh, T, T), first to last."""
    modules = net.attention_modules()
    for m in modules:
        m.record_weights = True
    try:
        net.eval()
        net(images)
        return [m.weights for m in modules]
    finally:
        for m in modules:
            m.record_weights, m.weights = False, None


def cls_rollout_maps(net: VisionTransformer, images: Tensor) -> Tensor:
    """(B, C, H, W) -> (B, gh, gw): how much of the top [CLS] state traces back to each patch."""
    rollout = attention_rollout(record_attention(net, images))  # (B, T, T)
    return rollout[:, 0, 1:].reshape(images.size(0), *net.grid)  # (B, N) -> (B, gh, gw)


def position_similarity(net: VisionTransformer) -> Tensor:
    """(gh, gw, gh, gw): cosine similarity of each patch's position embedding with every other's."""
    pos = net.pos_embed[0, 1:].detach()  # (N, D), [CLS] left out
    pos = torch.nn.functional.normalize(pos, dim=-1)
    return (pos @ pos.T).reshape(*net.grid, *net.grid)  # (N, N) -> (gh, gw, gh, gw)


def filter_components(net: VisionTransformer, k: int = 16) -> Tensor:
    """(k, C, P, P): the top-k principal components of the patch-embedding filters."""
    w = net.patch_embed.weight.detach()  # (D, C, P, P)
    D, C, P, _ = w.shape
    flat = w.reshape(D, C * P * P)
    flat = flat - flat.mean(0, keepdim=True)
    _, _, v = torch.linalg.svd(flat, full_matrices=False)  # v (min(D, CP²), CP²): components as rows
    return v[: min(k, v.size(0))].reshape(-1, C, P, P)


# -- the figures ---------------------------------------------------------------------------------
def _show(ax, image: Tensor, **kwargs) -> None:
    image = image.float().cpu()
    if image.dim() == 3:  # (C, H, W)
        image = image[0] if image.size(0) == 1 else image.permute(1, 2, 0)
    ax.imshow(image.numpy(), **kwargs)
    ax.set_xticks([])
    ax.set_yticks([])


def plot_rollout(images: Tensor, maps: Tensor, labels: Tensor, preds: Tensor, path: Path) -> Path:
    """Each test image beside its rollout map, upsampled to the image and overlaid."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    B, C, H, W = images.shape
    up = torch.nn.functional.interpolate(maps[:, None], size=(H, W), mode="nearest")[:, 0]  # (B, H, W)
    fig, axes = plt.subplots(2, B, figsize=(1.4 * B, 3.0))
    for i in range(B):
        shown = (images[i] - images[i].min()) / (images[i].max() - images[i].min() + 1e-8)
        _show(axes[0, i], shown, cmap="gray")
        axes[0, i].set_title(f"{int(labels[i])} -> {int(preds[i])}", fontsize=8)
        _show(axes[1, i], shown, cmap="gray")
        axes[1, i].imshow(up[i].cpu().numpy(), cmap="inferno", alpha=0.6)
    fig.suptitle("attention rollout from [CLS] (label -> prediction)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_position_similarity(sim: Tensor, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gh, gw = sim.shape[:2]
    fig, axes = plt.subplots(gh, gw, figsize=(0.6 * gw + 1, 0.6 * gh + 0.6), squeeze=False)
    for r in range(gh):
        for c in range(gw):
            im = axes[r, c].imshow(sim[r, c].cpu().numpy(), cmap="viridis", vmin=-1, vmax=1)
            axes[r, c].set_xticks([])
            axes[r, c].set_yticks([])
    fig.suptitle("cosine similarity of position embeddings", fontsize=9)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.6)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_filters(components: Tensor, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = components.size(0)
    cols = min(8, k)
    rows = (k + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(1.1 * cols, 1.2 * rows + 0.4), squeeze=False)
    for i, ax in enumerate(axes.ravel()):
        ax.axis("off")
        if i < k:
            comp = components[i]
            comp = (comp - comp.min()) / (comp.max() - comp.min() + 1e-8)
            _show(ax, comp, cmap="gray")
            ax.axis("on")
    fig.suptitle("patch-embedding filters: principal components", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def summary(net: VisionTransformer, batch: dict) -> dict[str, float]:
    """Numbers behind the pictures: mean position similarity by relation, and how rollout follows the ink.

    `rollout_ink_corr` is the correlation, over all patches of the batch, between a patch's rollout
    weight and the fraction of its pixels brighter than the background (the digit's strokes).
    """
    sim = position_similarity(net)  # (gh, gw, gh, gw)
    gh, gw = net.grid
    r = torch.arange(gh)[:, None, None, None].expand(gh, gw, gh, gw)
    c = torch.arange(gw)[None, :, None, None].expand(gh, gw, gh, gw)
    r2 = torch.arange(gh)[None, None, :, None].expand(gh, gw, gh, gw)
    c2 = torch.arange(gw)[None, None, None, :].expand(gh, gw, gh, gw)
    other = (r != r2) | (c != c2)
    maps = cls_rollout_maps(net, batch["image"])  # (B, gh, gw)
    images = batch["image"]
    ink = torch.nn.functional.avg_pool2d((images > images.amin(dim=(2, 3), keepdim=True)).float().mean(1, keepdim=True),
                                         net.patch_size)[:, 0]  # (B, gh, gw): share of non-background pixels
    return {
        "pos_sim_same_row": sim[(r == r2) & other].mean().item(),
        "pos_sim_same_column": sim[(c == c2) & other].mean().item(),
        "pos_sim_neighbours": sim[(r - r2).abs() + (c - c2).abs() == 1].mean().item(),
        "pos_sim_rest": sim[(r != r2) & (c != c2)].mean().item(),
        "rollout_cls_self": (1 - maps.flatten(1).sum(-1)).mean().item(),
        "rollout_ink_corr": torch.corrcoef(torch.stack([maps.flatten(), ink.flatten()]))[0, 1].item(),
    }


def make_pictures(net: VisionTransformer, batch: dict, out: Path, logger=None) -> list[Path]:
    """Write the three PNGs for one transformed test batch; log them as W&B images when given a run."""
    out.mkdir(parents=True, exist_ok=True)
    images, labels = batch["image"], batch["label"]
    net.eval()
    with torch.no_grad():
        preds = net(images).argmax(-1)
    paths = [
        plot_rollout(images, cls_rollout_maps(net, images), labels, preds, out / "vit_rollout.png"),
        plot_position_similarity(position_similarity(net), out / "vit_position_similarity.png"),
        plot_filters(filter_components(net), out / "vit_patch_filters.png"),
    ]
    if logger is not None:
        import wandb

        logger.log({f"pictures/{p.stem}": wandb.Image(str(p)) for p in paths})
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ckpt", help="a ViT checkpoint trained with data=mnist (or cifar10)")
    parser.add_argument("--out", default="outputs/pictures")
    parser.add_argument("--data", default="mnist", choices=["mnist", "cifar10"])
    parser.add_argument("--data-dir", default=os.environ.get("SEQBENCH_DATA_DIR", "data"))
    parser.add_argument("--images", type=int, default=8, help="how many test images to show")
    parser.add_argument("--summary-images", type=int, default=1000, help="test images the printed numbers average over")
    parser.add_argument("--wandb-project", default=None, help="also log the PNGs to this W&B project")
    args = parser.parse_args(argv)


    ckpt = load_checkpoint(args.ckpt)  # before the data is read: a file that would run code is refused first
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise UserError(f"the checkpoint {args.ckpt} holds no state_dict; give a .ckpt of a model=vit run.")
    dm = {"mnist": MNISTDataModule, "cifar10": CIFAR10DataModule}[args.data](args.data_dir, as_sequence=None)
    dm.setup()
    model = ViTModel(dm.spec, optimizer=None, **ckpt.get("hyper_parameters", {}))  # what load_from_checkpoint does
    model.load_state_dict(ckpt["state_dict"])
    test = dm.splits["test"]
    batch = dm.transform(test.__getitems__(list(range(args.images))), train=False)
    numbers = dm.transform(test.__getitems__(list(range(min(args.summary_images, len(test))))), train=False)
    for key, value in summary(model.net, numbers).items():
        print(f"{key}: {value:.3f}")
    run = None
    if args.wandb_project:
        import wandb

        run = wandb.init(project=args.wandb_project, job_type="pictures", config={"ckpt": args.ckpt})
    for path in make_pictures(model.net, batch, Path(args.out), run):
        print(path)
    if run is not None:
        run.finish()


if __name__ == "__main__":
    run_command(main, sys.argv[1:])
