"""A multirun's plain overrides must compose before the sweep picks a preset.

`python src/train.py -m experiment=frontier preset=a,b size=s` first composes the config once with
the overrides that are not sweeps (`size=s`) and no preset, then each job with its own. A key that only
the presets define (`size`) fails that first composition ("Could not override 'size'") although every
job would have it; the experiments that sweep presets by size therefore define it themselves."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

CONF = Path(__file__).resolve().parents[1] / "conf"
SIZED = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")
               if "size" in (OmegaConf.load(p).get("hydra", {}) or {}).get("sweeper", {}).get("params", {}))


def test_some_experiments_sweep_sizes():
    assert {"frontier", "frontier_ptb"} <= set(SIZED)


@pytest.mark.parametrize("experiment", SIZED)
def test_a_single_size_composes_before_the_sweep_picks_a_preset(experiment):
    # bug caught: `size` defined only in the presets, so `-m experiment=frontier preset=a,b size=s` stops
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[f"experiment={experiment}", "size=s"])
    assert cfg.size == "s"
