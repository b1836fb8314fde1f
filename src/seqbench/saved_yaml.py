"""A run's saved YAML (`.hydra/config.yaml`, `hydra.yaml`) read with libyaml, as OmegaConf reads it.

The campaign's dry run and the tuning reports read every job's saved config, several times over: with
OmegaConf's pure-Python loader that was 93 % of a 9-minute PTB cost report (3,184 reads of ~300 jobs).
libyaml parses the same text about ten times faster; the loader keeps OmegaConf's scalar rules (`1e12`
is a float, no timestamps), so a value reads the same either way (tests/test_saved_yaml.py).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf._utils import get_yaml_loader

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the pure-Python loader where libyaml is missing


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """libyaml's safe loader with OmegaConf's implicit scalar resolvers."""


_Loader.yaml_implicit_resolvers = {key: list(resolvers)
                                   for key, resolvers in get_yaml_loader().yaml_implicit_resolvers.items()}


def load_dict(path: Path) -> dict:
    """The file as plain containers (an empty file: {})."""
    return yaml.load(Path(path).read_text(), Loader=_Loader) or {}


def load(path: Path) -> DictConfig:
    """`OmegaConf.load(path)` for a saved mapping, parsed by libyaml."""
    return OmegaConf.create(load_dict(path))
