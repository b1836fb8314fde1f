"""Who a run is, in the words a user filters W&B by: its name and tags, from the family and the preset.

The family is what the model config builds (`seqbench.compose.family_of`: the recurrent cell, or the
family's module), not the `model=` choice: the PTB presets `preset=ptb/rnn` and `preset=ptb/gru` choose
`model=lstm` and change only `model.cell`, so a name from the choice would call all three recurrent runs of
`experiment=ptb_families` `lstm-ptb`. Names and tags are therefore
`<family>-<corpus>` (`gru-ptb`; a multirun numbers them, `seqbench.loggers.sweep_identity`) and
[family, corpus, preset, experiment], then the config's own `tags` (an experiment's, the command line's).
A `run_name` given in the config or on the command line is kept as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf, open_dict

from seqbench.compose import family_of
from seqbench.preset_choice import preset_of


def family(cfg: DictConfig, choices: dict | None = None) -> str | None:
    """The run's family (lstm, gru, gpt, ...): the one place a run's family is derived from its config."""
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
