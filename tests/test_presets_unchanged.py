"""The move of the presets from `+family=<corpus>/<name>` (conf/family/, appended after the defaults
list, with debug limits re-applied by hand) to `preset=<corpus>/<name>` (conf/preset/, in the defaults
list before `experiment` and `debug`) changes no value a run uses.

tests/fixtures/presets_before_issue34.json holds every old preset's resolved config, composed on main
before the move as `+family=<name> logger=csv` (and with `debug=fast`) through the same `compose_cfg`,
the probe presets under `experiment=long_range` and the pretraining ones under `experiment=pretraining
pretrained.bert=x pretrained.gpt=x`, the experiments that give them their data. Paths were written as
<root>, <data_dir> and <output_dir>; nothing else is excluded: the run name and tags say the family, the
corpus and the preset's name, which the move keeps.

A preset now comes before `experiment` in the defaults list (it came after), so inside a sweep the
experiment's values would win where both set a key. tests/fixtures/sweep_presets_before_issue34.json
holds every job of every experiment that sweeps presets, recorded the same way on main before the move
(`experiment=X +family=<each preset of its list>`, the other sweep axes at their first value): each
resolves as it did.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import CONF, FIXTURES, ROOT, compose_cfg
from omegaconf import OmegaConf

from seqbench.training.record import moved_target

BEFORE = json.loads((FIXTURES / "presets_before_issue34.json").read_text())
SWEEP_JOBS = json.loads((FIXTURES / "sweep_presets_before_issue34.json").read_text())
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


def test_every_recorded_preset_is_still_a_preset():
    """No preset of the record was lost in the move (presets added since, such as those of families
    registered later, have no "before" to compare with)."""
    now = {p.relative_to(CONF / "preset").with_suffix("").as_posix() for p in (CONF / "preset").rglob("*.yaml")}
    recorded = {key.split()[0].removeprefix("preset=") for key in BEFORE}
    assert recorded <= now, recorded - now


# Keys that changes after the record added to the configs, each with the value that keeps the recorded
# behaviour (issue 36: label smoothing for the recurrent translators, the held-out score of Tiny
# Shakespeare). A key missing from the record passes only at exactly this value.
ADDED_SINCE = {"model.label_smoothing": 0.0, "data.heldout_score": False}
# Sizes the frontier presets' tables gained since (issue 64: the IsoFLOP profiles' sizes below s): a
# table entry a run reads only when it names that size, so the recorded runs' values stay as they were
ADDED_SIZES = ("sizes.xxs.", "sizes.xs.")


def assert_resolves_as_before(args: list[str], before: dict, tmp_path) -> None:
    # a module issue 68 moved (the logger's): the recorded `_target_` at its new path, the class the same
    before = {k: moved_target(v) if k.endswith("._target_") else v for k, v in before.items()}
    now = resolved(compose_cfg(args, tmp_path), {str(tmp_path): "<output_dir>", str(ROOT): "<root>",
                                                 os.environ["SEQBENCH_DATA_DIR"]: "<data_dir>"})
    added = {k for k in now.keys() - before.keys()
             if (k in ADDED_SINCE and now[k] == ADDED_SINCE[k]) or k.startswith(ADDED_SIZES)}
    changed = {k: (before.get(k), now.get(k)) for k in (before.keys() | now.keys()) - added
               if before.get(k) != now.get(k)}
    assert not changed, changed


@pytest.mark.parametrize("key", sorted(BEFORE))
def test_a_preset_resolves_as_it_did_under_family(key, tmp_path):
    preset, *debug = key.split()
    name = preset.removeprefix("preset=")
    assert_resolves_as_before([*CONTEXT.get(name.split("/")[0], []), preset, "logger=csv", *debug], BEFORE[key], tmp_path)


def _sweeps_presets(experiment: str) -> bool:
    """Whether an experiment's sweep axes, its own or those of an experiment it includes, hold `preset`."""
    node = OmegaConf.load(CONF / "experiment" / f"{experiment}.yaml")
    if "preset" in (OmegaConf.select(node, "hydra.sweeper.params") or {}):
        return True
    return any(isinstance(d, str) and d != "_self_" and _sweeps_presets(d) for d in node.get("defaults", []))


def test_every_recorded_sweep_over_presets_still_sweeps_them():
    swept = {p.stem for p in (CONF / "experiment").glob("*.yaml") if _sweeps_presets(p.stem)}
    recorded = {key.split()[0].removeprefix("experiment=") for key in SWEEP_JOBS}
    assert recorded <= swept, recorded - swept


@pytest.mark.parametrize("job", sorted(SWEEP_JOBS))
def test_a_sweep_job_resolves_as_it_did_under_family(job, tmp_path):
    assert_resolves_as_before(job.split(), SWEEP_JOBS[job], tmp_path)
