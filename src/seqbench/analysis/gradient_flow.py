"""Gradient flow: how much the loss at one position is moved by the input `d` steps before it.

    python -m seqbench.analysis.gradient_flow --T 200 --out experiments/figures/gradients
    python -m seqbench.analysis.gradient_flow --runs outputs/multiruns/<time> [...] --T 200 --out ...  # trained

The vanishing-gradient claim (Hochreiter 1991; Bengio et al. 1994; Pascanu et al. 2013) made
visible. For a batch of copy-memory examples the loss is taken at the last position only (an answer
position), and the probe measures ||dL/dx_t||, x_t being the vector at position t that enters the
first recurrent layer or the first attention block (the embedded input; for the attention families
with its position encoding added). Averaged over the batch, per distance d = (loss position) - t.

    recurrent:  dL/dx_t = dL/dh_T . prod_{k=t+1..T} dh_k/dh_(k-1) . dh_t/dx_t     a product of d Jacobians
    attention:  x_t reaches the loss through one attention weight per layer       no product in d

The vector x_t is the input of the first layer rather than a hidden state h_t because the fused
kernels (cuDNN/oneDNN `nn.LSTM`) expose h_t only as an output: a gradient taken there is the
direct path through the head alone, not the path through the recurrence. x_t feeds h_t through one
fixed matrix, so ||dL/dx_t|| follows ||dL/dh_t|| up to that matrix.

The models are the `experiment=long_range` presets (`conf/preset/probe/*`), freshly initialised
(seeded) or loaded from the best checkpoint of a finished sweep job with the same T.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqbench.checkpoints import load_weights
from seqbench.compose import compose_final
from seqbench.data.streams import IGNORE_INDEX
from seqbench.entry import register_resolvers, run_command
from seqbench.families import colour, compared
from seqbench.provenance import command_line, write_record
from seqbench.training.loggers import resolve_mode
from seqbench.training.record import job_dirs, label_of, read_metrics
from seqbench.training.run import build


def first_layer(model: nn.Module) -> nn.Module:
    """The module whose first argument is the sequence x (B, T, C) that enters the first layer."""
    # recurrent, parallel recurrent (its left-to-right stack), Transformer, GPT
    for path in ("encoder.rnn", "encoder.forward_stack", "net.stack", "net.blocks"):
        module = model
        for name in path.split("."):
            module = getattr(module, name, None)
        if isinstance(module, nn.Module):
            return module
    raise ValueError(f"{type(model).__name__} has none of encoder.rnn, encoder.forward_stack, net.stack, "
                     "net.blocks to probe")


def position_loss(model: nn.Module, batch: dict, position: int = -1) -> Tensor:
    """The task's loss at one position (tagging) or on the whole-sequence output (the other tasks)."""
    task = model.spec.task
    if task == "tagging":
        tags = torch.full_like(batch["tags"], IGNORE_INDEX)
        tags[:, position] = batch["tags"][:, position]
        emissions = model.tag(batch)  # (B, T, K)
        return F.cross_entropy(emissions.flatten(0, 1).float(), tags.flatten(), ignore_index=IGNORE_INDEX)
    if task == "classification":
        return F.cross_entropy(model.classify(batch).float(), batch["label"])
    if task == "regression":
        return F.mse_loss(model.regress(batch).float(), batch["target"].float())
    raise ValueError(f"gradient flow is defined here for tagging, classification and regression, not {task!r}")


def input_gradients(model: nn.Module, batch: dict, position: int = -1) -> Tensor:
    """dL/dx (B, T, C): the gradient of the loss at `position` w.r.t. the first layer's input sequence."""
    captured: dict[str, Tensor] = {}

    def make_leaf(module, args):
        x = args[0].detach().requires_grad_(True)  # (B, T, C): a leaf, so its .grad is dL/dx
        captured["x"] = x
        return (x, *args[1:])

    handle = first_layer(model).register_forward_pre_hook(make_leaf)
    try:
        with torch.enable_grad():
            loss = position_loss(model, batch, position)
            (grad,) = torch.autograd.grad(loss, captured["x"])
    finally:
        handle.remove()
    return grad


def gradient_norms(model: nn.Module, batch: dict, position: int = -1) -> Tensor:
    """||dL/dx_t|| for every position t (T,), each example's norm averaged over the batch."""
    was_training = model.training
    model.eval()  # no dropout: the probe measures the function, not a random mask
    try:
        grad = input_gradients(model, batch, position)  # (B, T, C)
    finally:
        model.train(was_training)
    return grad.norm(dim=-1).mean(0)  # (B, T) -> (T,)


def by_distance(norms: Tensor, position: int = -1) -> list[tuple[int, float]]:
    """(distance from the loss position, norm) for every position at or before it."""
    T = norms.numel()
    pos = position % T
    return [(pos - t, float(norms[t])) for t in range(pos, -1, -1)]


# -- models of the long-range sweep -------------------------------------------------------------
def build_family(family: str, T: int, seed: int = 0, overrides: list[str] | None = None):
    """A fresh model of the `probe/<family>` preset and its copy-memory DataModule at gap T."""
    import lightning as L


    cfg = _compose(["experiment=long_range", f"preset=probe/{family}", f"data.T={T}", f"seed={seed}",
                    "logger=csv", *(overrides or [])])
    L.seed_everything(seed, workers=True)
    return build(cfg)


def _compose(overrides: list[str]):
    """The config `python src/train.py <overrides>` runs with: Hydra, then the recipe (seqbench.compose)."""
    register_resolvers()
    return compose_final(overrides)


def trained_checkpoints(runs: Path | list[Path], T: int) -> dict[str, Path]:
    """{family: best checkpoint} of the finished jobs of long_range sweeps (one dir or several) at gap T."""
    found = {}
    roots = [runs] if isinstance(runs, Path) else runs
    for job in sorted(d for root in roots for d in job_dirs(root)):
        metrics = read_metrics(job) or {}
        if metrics.get("status") != "completed" or f"data.T={T}" not in metrics.get("overrides", "").split():
            continue
        ckpt = metrics.get("tested_checkpoint")
        if ckpt and Path(ckpt).is_file():
            found[label_of(job)] = Path(ckpt)
    return found


def measure(families: list[str], T: int, n: int = 64, seed: int = 0, runs: list[Path] | None = None,
            dtype: torch.dtype = torch.float64) -> dict[str, list]:
    """{family: [(distance, norm), ...]} on n fixed copy-memory examples at gap T.

    In float64 by default: a tanh RNN's gradient falls below float32's smallest number (1e-45)
    about 100 steps back and would read as exactly 0 from there on; float64 shows the decay itself.
    """
    checkpoints = trained_checkpoints(runs, T) if runs else {}
    results = {}
    for family in families:
        datamodule, model = build_family(family, T, seed)
        if runs is not None:
            if family not in checkpoints:
                print(f"no finished {family} job at T={T} under {runs}; skipped", file=sys.stderr)
                continue
            load_weights(model, checkpoints[family])
        model.to(dtype)
        batch = {k: v[:n] for k, v in datamodule.fixed["val"].items()}
        results[family] = by_distance(gradient_norms(model, batch))
    return results


def write_outputs(results: dict[str, list], out: Path, title: str, stem: str = "gradient_flow") -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    csv_path, png_path = out / f"{stem}.csv", out / f"{stem}.png"
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["family", "distance", "grad_norm"])
        for family, rows in results.items():
            writer.writerows([family, d, f"{v:.6e}"] for d, v in rows)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for family, rows in results.items():
        d, v = zip(*[(d, v) for d, v in rows if v > 0])  # an exact 0 (underflow) has no place on a log axis
        ax.plot(d, v, label=family, color=colour(family))
    ax.set_yscale("log")
    ax.set_xlabel("distance from the loss position (steps)")
    ax.set_ylabel("||dL/dx_t|| (mean over examples)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return {"csv": csv_path, "png": png_path}


def log_to_wandb(paths: dict[str, Path], results: dict[str, list], mode: str, project: str, key: str) -> None:
    """The plot and the table as media of an `analysis` run ('auto': only when W&B is online)."""
    resolved = "disabled" if mode == "disabled" else resolve_mode(mode)
    if resolved == "disabled" or (mode == "auto" and resolved != "online"):
        return
    import wandb

    run_dir = Path("outputs")  # the run's files stay with the other runs, not beside the figures
    run_dir.mkdir(exist_ok=True)
    run = wandb.init(project=project, job_type="analysis", name=key, mode=resolved, dir=str(run_dir))
    table = wandb.Table(columns=["family", "distance", "grad_norm"],
                        data=[[f, d, v] for f, rows in results.items() for d, v in rows])
    run.log({f"{key}/plot": wandb.Image(str(paths["png"])), f"{key}/table": table})
    run.finish()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m seqbench.analysis.gradient_flow",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--T", type=int, default=200, help="copy-memory gap")
    parser.add_argument("--families", nargs="+", default=compared(), choices=compared())
    parser.add_argument("--runs", type=Path, nargs="+",
                        help="long_range multirun dirs: probe their trained models instead of fresh ones")
    parser.add_argument("--n", type=int, default=64, help="examples averaged over")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--float32", action="store_true", help="probe in float32 (underflows past ~100 steps)")
    parser.add_argument("--out", type=Path, default=Path("outputs/analysis/gradients"))
    parser.add_argument("--wandb", default="auto", choices=["auto", "online", "offline", "disabled"])
    parser.add_argument("--wandb-project", default="seqbench")
    args = parser.parse_args(argv)
    started = time.time()
    results = measure(args.families, args.T, args.n, args.seed, args.runs,
                      torch.float32 if args.float32 else torch.float64)
    kind = "trained" if args.runs else "fresh"
    stem = f"gradient_flow_{kind}_T{args.T}"
    paths = write_outputs(results, args.out, f"copy memory, T = {args.T}: {kind} models", stem)
    write_record(args.out, [paths["csv"].name], command_line("seqbench.analysis.gradient_flow", argv), started)
    for family, rows in results.items():
        picks = [r for r in rows if r[0] in (0, 10, 50, 100, 200, 500, 1000)]
        print(family, "  ".join(f"d={d}: {v:.2e}" for d, v in picks))
    print(f"wrote {paths['png']} and {paths['csv']}")
    log_to_wandb(paths, results, args.wandb, args.wandb_project, f"gradient_flow/{kind}_T{args.T}")
    return {"results": results, **paths}


if __name__ == "__main__":
    run_command(main, sys.argv[1:])
