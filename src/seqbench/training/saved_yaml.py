"""A run's saved YAML (`.hydra/config.yaml`, `hydra.yaml`) read with libyaml, as OmegaConf reads it.

The campaign's dry run and the tuning reports read every job's saved config, several times over: with
OmegaConf's pure-Python loader that was 93 % of a 9-minute PTB cost report (3,184 reads of ~300 jobs).
libyaml parses the same text several times faster; its parser is put in front of OmegaConf's own loader
class, which keeps OmegaConf's rules (`1e12` is a float, no timestamps, a duplicate key is an error), so
a value reads the same either way (tests/test_saved_yaml.py).
"""

from __future__ import annotations

from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf._utils import get_yaml_loader

_OmegaConfLoader = get_yaml_loader()


try:
    from yaml.cyaml import CParser
except ImportError:  # PyYAML built without libyaml
    CParser = None

if CParser is not None:
    class _Loader(CParser, _OmegaConfLoader):  # type: ignore[misc, valid-type]
        """libyaml's parser in front of OmegaConf's own loader class: its resolvers, constructors and
        its refusal of duplicate keys come along, and stay in step with OmegaConf's version."""

        def __init__(self, stream):
            CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
else:  # no libyaml: OmegaConf's loader as it is
    _Loader = _OmegaConfLoader


def load_dict(path: Path) -> dict:
    """The file as plain containers (an empty file: {})."""
    return yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_Loader) or {}


def load(path: Path) -> DictConfig:
    """`OmegaConf.load(path)` for a saved mapping, parsed by libyaml."""
    return OmegaConf.create(load_dict(path))
