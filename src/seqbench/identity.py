"""Who a run is, in the words a user filters W&B by: its name and tags, from the family and the preset.

The family is what the model config builds (`seqbench.families.family_of`: the recurrent cell, or the
family's module), not the `model=` choice: the PTB presets `preset=ptb/rnn` and `preset=ptb/gru` choose
`model=lstm` and change only `model.cell`, so a name from the choice would call all three recurrent runs of
`experiment=ptb_families` `lstm-ptb`. Names and tags are therefore
`<family>-<corpus>` (`gru-ptb`; a multirun numbers them, `seqbench.training.loggers.sweep_identity`) and
[family, corpus, preset, experiment], then the config's own `tags` (an experiment's, the command line's).
A `run_name` given in the config or on the command line is kept as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf, open_dict

from seqbench.families import family_of


# The preset a run was composed with, read from its Hydra group choices, for runs of both layouts.
# Issue 34 moved presets from `+family=<corpus>/<name>` (conf/family/) to `preset=<corpus>/<name>`
# (conf/preset/); a run directory recorded before keeps `family: ptb/lstm` in its `.hydra/hydra.yaml`,
# one recorded after says `preset: ptb/lstm`. Everything that reads the choice reads it here, so old
# and new runs are grouped, named and tagged alike.
def preset_of(choices: Mapping | None) -> str | None:
    """`ptb/lstm` from `{"preset": "ptb/lstm"}` or, for a run from before issue 34, from
    `{"family": "ptb/lstm"}`."""
    choices = choices or {}
    return choices.get("preset") or choices.get("family")


def preset_name(preset: str) -> str:
    """A preset's own name, the one a table's row carries: `ptb/lstm_fb1` -> `lstm_fb1`,
    `frontier/ptb/gpt` -> `gpt` (its family: `seqbench.families.family_of`)."""
    return str(preset).rsplit("/", 1)[-1]


def family(cfg: DictConfig, choices: dict | None = None) -> str | None:
    """The run's family (lstm, gru, gpt, ...) as its name and W&B tags give it: `family_of` its model
    config, or the `model=` choice where that config cannot be read."""
    try:
        return family_of(cfg.model)
    except Exception:  # an unknown _target_: check_config says so in one sentence before any work
        return (choices or {}).get("model")


@dataclass(frozen=True)
class RunIdentity:
    family: str | None
    corpus: str | None
    preset: str | None  # preset=<corpus>/<name>
    experiment: str | None

    @property
    def name(self) -> str:
        return "-".join(p for p in (self.family, self.corpus) if p)

    @property
    def tags(self) -> list[str]:
        return list(dict.fromkeys(t for t in (self.family, self.corpus, self.preset, self.experiment) if t))


def identify(cfg: DictConfig, choices: dict | None) -> RunIdentity:
    choices = choices or {}
    return RunIdentity(family(cfg, choices), choices.get("data"), preset_of(choices), choices.get("experiment"))


def name_and_tag(cfg: DictConfig, choices: dict | None) -> DictConfig:
    """Fill `run_name` (when not given) and put the identity's tags before the config's own, in place."""
    if "model" not in cfg or "data" not in cfg:  # eval.yaml: the run's own config names it
        return cfg
    who = identify(cfg, choices)
    own = [str(t) for t in (OmegaConf.to_container(cfg.tags, resolve=True) if cfg.get("tags") else [])]
    with open_dict(cfg):
        if cfg.get("run_name") is None:
            cfg.run_name = who.name
        cfg.tags = list(dict.fromkeys(who.tags + own))
    return cfg
