"""What the entry points share: resolvers, one-sentence errors, and sweep-safe failures.

A `UserError` in a single run prints its sentence and exits with status 1 — no traceback. In a
multirun the exception is re-raised for Hydra to record as that job's failure (its `metrics.json`
already says `status: failed` and why), and the other jobs go on; `JobSummary` lists the failures
at the end.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from seqbench.errors import UserError

log = logging.getLogger("seqbench")
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def register_resolvers() -> None:
    if not OmegaConf.has_resolver("project_root"):
        # the checkout's root when run from a clone; the working directory for an installed package
        root = PROJECT_ROOT if (PROJECT_ROOT / "conf").is_dir() else Path.cwd()
        OmegaConf.register_new_resolver("project_root", lambda: str(root))
    if not OmegaConf.has_resolver("families"):
        OmegaConf.register_new_resolver("families", _family_presets)


def _family_presets(folder: str, *variants: str) -> str:
    """`${families:ptb}` -> `ptb/rnn,ptb/lstm,...`: an experiment's sweep over the compared families
    (seqbench.families), imported on use so that the command line is parsed before torch loads."""
    from seqbench.families import presets

    return presets(folder, *variants)


def hydra_context() -> tuple[Path, dict, list[str], bool]:
    """(output dir, group choices, overrides, is multirun) of the running Hydra job."""
    hc = HydraConfig.get()
    choices = {k: v for k, v in hc.runtime.choices.items() if isinstance(v, str)}
    return Path(hc.runtime.output_dir), choices, list(hc.overrides.task), hc.mode == RunMode.MULTIRUN


def final_config(cfg: DictConfig, output_dir: Path, choices: dict, overrides: list[str]) -> DictConfig:
    """The running job's config with its recipe, debug bounds, name and tags (seqbench.compose), saved
    as the run's `.hydra/config.yaml` so the file shows every value the run used."""
    from hydra import compose
    from hydra.errors import HydraException

    from seqbench.compose import finalize, save_config
    from seqbench.errors import ConfigError

    name = HydraConfig.get().job.config_name
    try:
        final = finalize(cfg, overrides, choices, lambda o: compose(config_name=name, overrides=o))
    except HydraException as exc:
        raise ConfigError(f"the config could not be composed with its recipe: {exc}") from None
    save_config(final, output_dir)
    return final


def guarded(fn, *args, multirun: bool, **kwargs):
    try:
        return fn(*args, **kwargs)
    except UserError as exc:
        if multirun:
            raise
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(1)


def run_command(main, argv: list[str] | None = None) -> None:
    """A `python -m seqbench...` command: a UserError prints its sentence and exits with status 1."""
    try:
        main(argv)
    except UserError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(1)
