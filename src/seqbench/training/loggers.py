"""Weights & Biases that works with no account and no network.

`mode: auto` runs online only when an API key is configured and the W&B server answers; otherwise
it runs offline, writes the run under the run directory, and says in one line how to upload it
later (`wandb sync`). Each job of a Hydra multirun is its own W&B run, grouped by the sweep.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Literal

from lightning.pytorch.loggers import WandbLogger

log = logging.getLogger(__name__)


def _has_api_key() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    netrc = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    return netrc.is_file() and "api.wandb.ai" in netrc.read_text(errors="ignore")


def _server_reachable(host: str = "api.wandb.ai", port: int = 443, timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def resolve_mode(mode: str) -> str:
    """'auto' -> 'online' or 'offline'; an explicit WANDB_MODE in the environment wins."""
    env = os.environ.get("WANDB_MODE")
    if env in ("online", "offline", "disabled"):
        return env
    if mode != "auto":
        return mode
    return "online" if _has_api_key() and _server_reachable() else "offline"


def sweep_identity(name: str | None, group: str | None) -> tuple[str | None, str | None]:
    """In a Hydra multirun, group the jobs by their sweep and number their run names."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        hc = HydraConfig.get()
    except (ImportError, ValueError):  # not running under Hydra (a notebook, a test)
        return name, group
    if hc.mode != RunMode.MULTIRUN:
        return name, group
    return f"{name}-{hc.job.num}" if name else None, group or f"sweep-{Path(hc.sweep.dir).name}"


def wandb_logger(project: str, save_dir: str, name: str | None = None, group: str | None = None,
                 tags: list[str] | None = None, mode: Literal["auto", "online", "offline", "disabled"] = "auto",
                 entity: str | None = None, log_model: bool = False, job_type: str | None = None) -> WandbLogger:
    mode = resolve_mode(mode)
    name, group = sweep_identity(name, group)
    Path(save_dir).mkdir(parents=True, exist_ok=True)
    if mode == "offline":
        log.info("W&B is offline (no API key or no network): upload later with `wandb sync %s/wandb/offline-run-*`",
                 save_dir)
    # the mode goes to wandb.init as it is; Lightning's `offline=True` would only set WANDB_MODE for the
    # whole process, and refuses log_model, which offline runs keep for `wandb sync` to upload
    logger = WandbLogger(project=project, name=name, group=group, tags=list(tags or []), save_dir=save_dir,
                         mode=mode, entity=entity, log_model=log_model, job_type=job_type)
    # Lightning always passes `anonymous` to wandb.init (None unless asked), and wandb >= 0.19 warns at
    # every run that the setting has no effect; left out, wandb.init gets exactly what was asked for
    logger._wandb_init.pop("anonymous", None)
    return logger
