"""How long one training step of each image preset takes here: the numbers that size the CPU recipes.

    python -m seqbench.analysis.image_step_time mnist/cnn mnist/vit mnist/lstm_rows \
        "mnist/vit model.patch_size=4" [--batch 128] [--steps 10]

Each argument is a family preset (conf/preset/<name>.yaml) with optional overrides after it. The
network is built exactly as `src/train.py` builds it (the data's declared shape, the preset's
sizes), fed random uint8 images through the DataModule's own transform, and timed for `--steps`
forward + backward + AdamW steps after three warm-up steps. Prints ms per step, the step time of an
epoch of MNIST's 55,000 training images, and the parameter count.
"""

from __future__ import annotations

import argparse
import time

import torch

from seqbench.compose import compose_final
from seqbench.entry import register_resolvers
from seqbench.tables import table_lines, table_row


def compose(family: str, overrides: list[str]):
    """The config `python src/train.py preset=<family> <overrides>` runs with (seqbench.compose)."""
    register_resolvers()
    return compose_final([f"preset={family}", "paths.data_dir=.", "logger=csv", *overrides])


def step_time(family: str, overrides: list[str], batch: int, steps: int) -> dict:
    import hydra

    cfg = compose(family, overrides)
    dm = hydra.utils.instantiate(cfg.data)
    model = hydra.utils.instantiate(cfg.model, spec=dm.spec)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    C, H, W = dm.shape
    raw = {"image": torch.randint(0, 256, (batch, C, H, W), dtype=torch.uint8),
           "label": torch.randint(0, dm.num_classes, (batch,))}
    model.train()
    for i in range(steps + 3):
        if i == 3:
            started = time.perf_counter()
        b = dm.transform(raw, train=True)
        loss = torch.nn.functional.cross_entropy(model.classify_image(b), b["label"])
        opt.zero_grad()
        loss.backward()
        opt.step()
    ms = (time.perf_counter() - started) / steps * 1000
    return {"preset": " ".join([family, *overrides]), "params": model.num_params(), "ms_per_step": ms,
            "epoch_s": ms / 1000 * (55000 // batch)}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("presets", nargs="+", help='a family preset, optionally with overrides: "mnist/vit model.patch_size=4"')
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}")
    print("\n".join(table_lines(["preset", "params", "ms/step", "s per epoch (55k images)"], align="lrrr")))
    rows = []
    for preset in args.presets:
        family, *overrides = preset.split()
        row = step_time(family, overrides, args.batch, args.steps)
        rows.append(row)
        print(table_row([row["preset"], f"{row['params']:,}", f"{row['ms_per_step']:.0f}", f"{row['epoch_s']:.0f}"]), flush=True)
    return rows


if __name__ == "__main__":
    main()
