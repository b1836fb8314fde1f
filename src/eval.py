"""Evaluate a checkpoint on a split and sample from it: `python src/eval.py ckpt_path=... split=test`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run from a clone without installing

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from seqbench.entry import guarded, hydra_context, register_resolvers  # noqa: E402

register_resolvers()


@hydra.main(version_base="1.3", config_path="../conf", config_name="eval")
def main(cfg: DictConfig) -> None:
    from seqbench.training.evaluate import evaluate

    output_dir, _, _, multirun = hydra_context()
    guarded(evaluate, cfg, output_dir, multirun=multirun)


if __name__ == "__main__":
    main()
