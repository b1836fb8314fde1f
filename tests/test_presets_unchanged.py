"""The move of the presets from `+family=<corpus>/<name>` (conf/family/, appended after the defaults
list, with debug limits re-applied by hand) to `preset=<corpus>/<name>` (conf/preset/, in the defaults
list before `experiment` and `debug`) changes no value a run uses.

tests/fixtures/presets_before_issue34.json holds every old preset's resolved config, composed on main
before the move as `+family=<name> logger=csv` (and with `debug=fast`) through the same `compose_cfg`,
the probe presets under `experiment=long_range` and the pretraining ones under `experiment=pretraining
pretrained.bert=x pretrained.gpt=x`, the experiments that give them their data. Paths were written as
<root>, <data_dir> and <output_dir>; nothing else is excluded: the run name and tags say the family, the
corpus and the preset's name, which the move keeps.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import CONF, FIXTURES, ROOT, compose_cfg
from omegaconf import OmegaConf

BEFORE = json.loads((FIXTURES / "presets_before_issue34.json").read_text())
CONTEXT = {"probe": ["experiment=long_range"],
           "pretraining": ["experiment=pretraining", "pretrained.bert=x", "pretrained.gpt=x"]}


def resolved(cfg, places: dict[str, str]) -> dict:
    """Every key of `cfg` but Hydra's, flattened (`model.optimizer.lr`) and resolved, with the paths of
    this checkout written as their `places` names."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain.pop("hydra")

    def flat(node, prefix=""):
        for k, v in node.items():
            if isinstance(v, dict) and v:
                yield from flat(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}", v

    text = json.dumps(dict(flat(plain)), sort_keys=True)
    for path, name in sorted(places.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(path, name)
    return json.loads(text)


def test_the_fixture_covers_every_preset():
    now = {p.relative_to(CONF / "preset").with_suffix("").as_posix() for p in (CONF / "preset").rglob("*.yaml")}
    recorded = {key.split()[0].removeprefix("preset=") for key in BEFORE}
    assert now == recorded


@pytest.mark.parametrize("key", sorted(BEFORE))
def test_a_preset_resolves_as_it_did_under_family(key, tmp_path):
    preset, *debug = key.split()
    name = preset.removeprefix("preset=")
    cfg = compose_cfg([*CONTEXT.get(name.split("/")[0], []), preset, "logger=csv", *debug], tmp_path)
    now = resolved(cfg, {str(tmp_path): "<output_dir>", str(ROOT): "<root>",
                         os.environ["SEQBENCH_DATA_DIR"]: "<data_dir>"})
    before = BEFORE[key]
    changed = {k: (before.get(k), now.get(k)) for k in before.keys() | now.keys() if before.get(k) != now.get(k)}
    assert not changed, changed
