"""What the entry points share: resolvers, one-sentence errors, and sweep-safe failures.

A `UserError` in a single run prints its sentence and exits with status 1 — no traceback. In a
multirun the exception is re-raised for Hydra to record as that job's failure (its record
already says `status: failed` and why), and the other jobs go on; `JobSummary` lists the failures
at the end.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

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
