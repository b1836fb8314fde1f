"""Train and test one model on one corpus: `python src/train.py model=lstm data=ptb`.

Composition, checks and the run itself live in `seqbench.compose` and `seqbench.run`; this file only
connects Hydra to them and returns the metric an Optuna sweep optimises (`optimized_metric`).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run from a clone without installing

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from seqbench.entry import final_config, guarded, hydra_context, register_resolvers  # noqa: E402

register_resolvers()


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    from seqbench.run import train  # heavy imports after Hydra has parsed the command line

    output_dir, choices, overrides, multirun = hydra_context()
    cfg = guarded(final_config, cfg, output_dir, choices, overrides, multirun=multirun)
    metrics = guarded(train, cfg, output_dir, choices, overrides, multirun=multirun)
    value = metrics.get(cfg.get("optimized_metric") or "")
    return float(value) if value is not None else None


if __name__ == "__main__":
    main()
