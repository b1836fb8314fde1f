"""Each version of a config file parsed once per test process, not once per composition.

Hydra reads every file a composition selects anew (FileConfigSource.load_config: OmegaConf.load, a
pure-Python YAML parse): about 20 files and a third of each composition's time. The suite composes
thousands of times in-process (tests/conftest.py's compose_cfg and the code under test), mostly the
same files. `install()` keeps the parsed YAML of a file under its path, modification time and size,
so a file a test writes or edits is read again, and each composition still gets a config of its own,
built by `OmegaConf.create` from that YAML as `OmegaConf.load` builds it (Hydra edits what it loads).
Runs the tests start in a subprocess parse as usual.
"""

from __future__ import annotations

import os
import pickle

import yaml
from hydra.core.plugins import Plugins
from hydra.plugins.config_source import ConfigResult, ConfigSource
from omegaconf import OmegaConf
from omegaconf._utils import get_yaml_loader

_PARSED: dict[tuple[str, int, int], tuple[dict, bytes]] = {}


def _load_config(self: ConfigSource, config_path: str) -> ConfigResult:
    """FileConfigSource.load_config, with the header and YAML of each file version kept."""
    full_path = os.path.realpath(os.path.join(self.path, self._normalize_file_name(config_path)))
    if not os.path.exists(full_path):
        return _HYDRAS_LOAD_CONFIG(self, config_path)  # Hydra's own error
    stat = os.stat(full_path)
    key = (full_path, stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        with open(full_path, encoding="utf-8") as f:
            text = f.read()
        obj = yaml.load(text, Loader=get_yaml_loader())
        if obj is not None and not isinstance(obj, (list, dict)):
            return _HYDRAS_LOAD_CONFIG(self, config_path)  # OmegaConf.load's error
        _PARSED[key] = (ConfigSource._get_header_dict(text[:512]), pickle.dumps(obj))
    header, obj = _PARSED[key]
    obj = pickle.loads(obj)  # a fresh copy for OmegaConf.create
    return ConfigResult(config=OmegaConf.create() if obj is None else OmegaConf.create(obj),
                        path=f"{self.scheme()}://{self.path}", provider=self.provider, header=dict(header))


# Hydra's plugin scan imports its config sources anew: the class compositions use is the one it found.
_FILE_SOURCE = next(c for c in Plugins.instance().discover(ConfigSource) if c.scheme() == "file")
_HYDRAS_LOAD_CONFIG = _FILE_SOURCE.load_config


def install() -> None:
    _FILE_SOURCE.load_config = _load_config
