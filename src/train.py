"""Train and test one model on one corpus: `python src/train.py model=lstm data=ptb`.

Composition, checks and the run itself live in `seqbench.compose` and `seqbench.training.run`; this file only
connects Hydra to them and returns the metric an Optuna sweep optimises (`optimized_metric`).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run from a clone without installing

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from seqbench.entry import guarded, hydra_context, register_resolvers  # noqa: E402

register_resolvers()


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    # torch and Lightning (which compose reaches through the family registry) load after Hydra has parsed
    # the command line: `--help` and a mistyped override answer at once
    from seqbench.compose import final_config
    from seqbench.training.run import finished_before, train

    output_dir, choices, overrides, multirun = hydra_context()
    cfg = guarded(final_config, cfg, output_dir, choices, overrides, multirun=multirun)
    # a sweep's job launched again (by any launcher) that finished here, or was restored from the archive
    metrics = (finished_before(output_dir) if multirun else None) or guarded(
        train, cfg, output_dir, choices, overrides, multirun=multirun)
    value = metrics.get(cfg.get("optimized_metric") or "")
    return float(value) if value is not None else None


if __name__ == "__main__":
    main()
