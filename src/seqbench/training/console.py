"""What a run prints when it starts: its config as a tree, and every log line once.

* **The config tree** (as lightning-hydra-template's `print_config_tree`): each top-level group of
  the resolved config as a branch of Rich-highlighted YAML, the groups a user changes most first. It
  is printed on a terminal and always saved as `config_tree.log` in the run directory, beside
  `.hydra/config.yaml`, which holds the same values for composing the run again.
* **No line that is not about the run.** Lightning's two "💡 Tip:" advertisements (install litlogger,
  install litmodels; printed as each Trainer is built) and "Trainer already configured with model
  summary callbacks ... Skipping" (seqbench replaces Lightning's summary on purpose,
  `seqbench.callbacks.model_summary`) are dropped; every other line of Lightning's stays. Its warnings
  that are false for a run are `seqbench.training.lightning_warnings`'.
* **Each log line once.** The `lightning` package logger carries a console handler of its own
  (`INFO: ...`) and also passes its records up to the root logger, where Hydra's console and file
  handlers print them again (`[time][lightning...][INFO] - ...`). Where the root logger has handlers
  (every Hydra run), Lightning's own is removed, so its lines come once, in Hydra's format, and
  also land in the run's log file.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

ORDER = ("data", "model", "trainer", "callbacks", "logger", "paths")  # then the rest, as composed


def config_tree(cfg: DictConfig, order: tuple[str, ...] = ORDER):
    """A Rich tree of the config's top-level keys (Hydra's own `hydra` node left out)."""
    from rich.syntax import Syntax
    from rich.tree import Tree

    tree = Tree("CONFIG", style="dim", guide_style="dim")
    keys = [k for k in order if k in cfg] + [k for k in cfg if k not in order and k != "hydra"]
    for key in keys:
        node = cfg[key]
        text = OmegaConf.to_yaml(node, resolve=True) if isinstance(node, DictConfig) else str(node)
        tree.add(key, style="dim", guide_style="dim").add(Syntax(text, "yaml"))
    return tree


def show_config(cfg: DictConfig, output_dir: Path, terminal: bool | None = None) -> Path:
    """Print the config tree when the output is a terminal, and save it as `<output_dir>/config_tree.log`."""
    import rich

    tree = config_tree(cfg)
    if sys.stdout.isatty() if terminal is None else terminal:
        rich.print(tree)
    path = Path(output_dir) / "config_tree.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        rich.print(tree, file=f)
    return path


# Lightning's lines (its `rank_zero_info` logger) that say nothing about the run, by their start
NOT_ABOUT_THE_RUN = ("💡 Tip: For seamless cloud logging and experiment tracking",
                     "💡 Tip: For seamless cloud uploads and versioning",
                     "Trainer already configured with model summary callbacks")
LIGHTNING_INFO = "lightning.pytorch.utilities.rank_zero"


class _NotAboutTheRun(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith(NOT_ABOUT_THE_RUN)


def log_once() -> None:
    """Lightning's records to the root logger's handlers (Hydra's console and `<run>/train.log`), once.

    Lightning gives its package loggers console handlers of their own at import, and where the root
    logger had no handler yet it also stops them propagating: imported before Hydra configured logging
    (a notebook, a `python -m` command, a process that forks runs), its lines would miss the log file.
    Also drops the lines of Lightning's that say nothing about the run (`NOT_ABOUT_THE_RUN`)."""
    import lightning  # noqa: F401  (its import adds the handlers)

    if logging.getLogger().handlers:
        for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
            package = logging.getLogger(name)
            for handler in list(package.handlers):
                package.removeHandler(handler)
            package.propagate = True
    info = logging.getLogger(LIGHTNING_INFO)
    if not any(isinstance(f, _NotAboutTheRun) for f in info.filters):
        info.addFilter(_NotAboutTheRun())
