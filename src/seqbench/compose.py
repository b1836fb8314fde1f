"""From the command line to the config a run uses: Hydra's composition plus one step Hydra cannot express.

**The training recipe follows the task.** `model=lstm data=sst2` must not train a sentiment
classifier with the recurrent family's language-model recipe (SGD at lr 20). A recipe is a config
file per family and task, `conf/recipe/<task>/<family>.yaml` (optimizer, rate, schedule, clipping,
epochs); a family without one for a task takes its base family's (seqbench.families: GRU and RNN
the LSTM's, the Transformer and BERT the GPT's). The task is known only from the data's class — a
Hydra defaults list cannot choose a group by it (an interpolated default may not override groups).
So the run composes once, reads the task and family, and composes again with the recipe file. The
`recipe` group sits before `preset`, `experiment` and `debug` in `conf/train.yaml`, so a preset, an
experiment, a debug mode and the command line all win over it; `recipe=none` turns it off and
`recipe=<task>/<family>` picks a file by hand. The recipe's name, `<task>/<family>` whichever file
served it, is kept in the config (`recipe:`), so a run's saved `.hydra/config.yaml` shows every
value used and composes to the same run again without a second recipe.

A debug mode bounds every preset by the defaults order alone: `debug` comes after `preset` and
`experiment`, so `debug=fast`'s `max_steps` wins over a preset's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import yaml
from hydra import compose as hydra_compose
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf, open_dict

from seqbench.entry import register_resolvers
from seqbench.errors import ConfigError
from seqbench.families import FAMILIES, family_of
from seqbench.identity import name_and_tag

log = logging.getLogger("seqbench")

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
Compose = Callable[[list[str]], DictConfig]


def task_of(data: DictConfig) -> str:
    """The recipe folder of a data config: the task it poses, or `probe` for the synthetic probes,
    which need their own recipe (fresh data every batch, nothing to overfit, long gaps)."""
    cls = get_class(data._target_)
    return getattr(cls, "recipe_task", None) or cls.task


def recipe_for(cfg: DictConfig, conf_dir: Path = CONF_DIR) -> tuple[str, Path]:
    """(name, file) of the recipe for this model and data: `<task>/<family>` and the file that serves it
    (`recipe_file`); the file may not exist (no recipe: the model config's defaults apply)."""
    name = f"{task_of(cfg.data)}/{family_of(cfg.model)}"
    return name, conf_dir / "recipe" / f"{recipe_file(name, conf_dir)}.yaml"


def recipe_file(name: str, conf_dir: Path = CONF_DIR) -> str:
    """The recipe file (under conf/recipe/) that serves the recipe `<task>/<family>`: the family's own
    if it has one, else its base family's (seqbench.families: GRU and RNN take the LSTM's, the
    Transformer and BERT the GPT's), following bases; `name` itself when none has one."""
    task, _, family = name.partition("/")
    seen: set[str] = set()
    while family and family not in seen:
        if (conf_dir / "recipe" / task / f"{family}.yaml").is_file():
            return f"{task}/{family}"
        seen.add(family)
        family = FAMILIES[family].base if family in FAMILIES else None
    return name


def finalize(cfg: DictConfig, overrides: list[str], choices: dict, compose: Compose,
             conf_dir: Path = CONF_DIR) -> DictConfig:
    """The config of the run: `cfg` recomposed with its recipe, when it has one, named and tagged by its
    family and preset (seqbench.identity).

    `overrides` are the command line's (Hydra's task overrides), `choices` the groups chosen, and
    `compose(overrides)` composes the same primary config anew.
    """
    if isinstance(cfg.get("family"), str):  # no `family` group any more: Hydra took `+family=x` for a new key
        raise ConfigError(f"+family={cfg.family} is written preset={cfg.family} since presets moved to "
                          f"conf/preset/ (issue 34); as it stands the run would ignore it.")
    extra: list[str] = []
    name = next((o.split("=", 1)[1] for o in overrides if o.lstrip("+").startswith("recipe=")), None)
    if name is None and cfg.get("recipe") is None and "model" in cfg and "data" in cfg:
        try:
            auto, path = recipe_for(cfg, conf_dir)
        except Exception:  # an unknown _target_: check_config says so in one sentence before any work
            auto, path = "", None
        if path is not None and path.is_file():
            name, extra = auto, [f"recipe={recipe_file(auto, conf_dir)}"]
    chosen_by_hand = name is not None and not extra and name != "none"
    if not extra and not chosen_by_hand:
        return name_and_tag(cfg, choices)
    final = compose(list(overrides) + extra)
    if name and name != "none":
        without = cfg if extra else compose([o for o in overrides if not o.lstrip("+").startswith("recipe=")]
                                            + ["recipe=none"])
        keep_later_groups(without, final, extra[0].split("=", 1)[1] if extra else name, conf_dir)
        with open_dict(final):
            final.recipe = name  # the recipe of this family and task (classification/gru), whichever file served it
    return name_and_tag(final, choices)


# The model's nested groups a recipe may choose, with the keys each one writes into `model`.
_GROUPS = {"optimizer": ("optimizer",), "scheduler": ("scheduler", "scheduler_interval", "scheduler_monitor")}


def recipe_groups(name: str, conf_dir: Path = CONF_DIR) -> dict[str, str]:
    """The `model/optimizer` and `model/scheduler` options a recipe selects (following its includes)."""
    path = conf_dir / "recipe" / f"{name}.yaml"
    chosen: dict[str, str] = {}
    for entry in (yaml.safe_load(path.read_text()) or {}).get("defaults", []) if path.is_file() else []:
        if isinstance(entry, str) and entry != "_self_":
            chosen.update(recipe_groups(entry, conf_dir))
        elif isinstance(entry, dict):
            for key, option in entry.items():
                group = key.removeprefix("override").strip().removeprefix("/")
                if group.startswith("model/"):
                    chosen[group.split("/", 1)[1]] = option
    return chosen


def _target(node) -> str | None:
    return node.get("_target_") if isinstance(node, DictConfig) else None


def keep_later_groups(without: DictConfig, final: DictConfig, recipe: str, conf_dir: Path = CONF_DIR) -> None:
    """Where something after the recipe — a preset, an experiment, the command line — chose another
    optimizer or scheduler than the recipe did, that group keeps exactly the values it has without the
    recipe: the recipe's lr for Adam must not land on a preset's AdamW, nor step decay's `start_epoch`
    on a warmup-cosine schedule (which would not even accept it)."""
    for group, option in recipe_groups(recipe, conf_dir).items():
        if group not in _GROUPS:
            continue
        node = OmegaConf.load(conf_dir / "model" / group / f"{option}.yaml")
        recipe_target = _target(node.get(group) if group == "scheduler" else node)  # scheduler: @package model
        if _target(final.model.get(group)) != recipe_target:
            for key in _GROUPS[group]:
                if key in without.model:
                    final.model[key] = without.model[key]


def describe(cfg: DictConfig, conf_dir: Path = CONF_DIR) -> str:
    """One line for the run's log: which recipe applied, from which file."""
    recipe = cfg.get("recipe")
    if recipe and recipe != "none":
        served = recipe_file(recipe, conf_dir)
        source = f"conf/recipe/{served}.yaml" + (f", the {served.split('/', 1)[1]} recipe" if served != recipe else "")
        return f"recipe {recipe} ({source}) under the command line, experiment and presets; recipe=none turns it off"
    try:
        name, _ = recipe_for(cfg, conf_dir)
    except Exception:  # a config without a model or data (eval.py)
        return "no recipe"
    model = cfg.model.get("_target_", "").rsplit(".", 1)[-1]
    return f"no recipe for {name}: the model config's defaults apply ({model})"


def save_config(cfg: DictConfig, output_dir: Path) -> None:
    """Replace Hydra's `.hydra/config.yaml` with the config the run uses.

    Values that read Hydra's group choices (`run_name`, `tags`) are resolved first: composing the
    saved file again (`--config-path <run>/.hydra --config-name config`) has no such choices.
    """
    path = output_dir / ".hydra" / "config.yaml"
    if not path.parent.is_dir():
        return
    out = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    for key in ("run_name", "tags"):
        if key in cfg:
            try:
                out[key] = _resolved(cfg, key)
            except Exception:  # leave it as it was: the run itself would have failed on it
                pass
    OmegaConf.save(out, path)


def _resolved(cfg: DictConfig, key: str):
    node = OmegaConf.select(cfg, key)
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def final_config(cfg: DictConfig, output_dir: Path, choices: dict, overrides: list[str]) -> DictConfig:
    """The running job's config with its recipe, debug bounds, name and tags, saved as the run's
    `.hydra/config.yaml` so the file shows every value the run used (what `src/train.py` trains)."""
    name = HydraConfig.get().job.config_name
    try:
        final = finalize(cfg, overrides, choices, lambda o: hydra_compose(config_name=name, overrides=o))
    except HydraException as exc:
        raise ConfigError(f"the config could not be composed with its recipe: {exc}") from None
    save_config(final, output_dir)
    return final


def compose_final(overrides: list[str], config_name: str = "train", conf_dir: Path = CONF_DIR) -> DictConfig:
    """Compose outside a running Hydra app (tests, `python -m seqbench.compose`), as `src/train.py` does."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    def raw(overrides: list[str]) -> DictConfig:
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
            cfg = hydra_compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
        with open_dict(cfg):  # so that ${hydra:runtime.output_dir} resolves
            cfg.hydra.runtime.output_dir = str(Path.cwd() / "outputs" / "compose")
            cfg.hydra.job.num = 0
        HydraConfig.instance().set_config(cfg)
        return cfg

    cfg = raw(overrides)
    choices = {k: v for k, v in cfg.hydra.runtime.choices.items() if isinstance(v, str)}
    return finalize(cfg, overrides, choices, raw, conf_dir)


def main(argv: list[str] | None = None) -> None:
    """`python -m seqbench.compose model=lstm data=sst2`: the config a run would use, recipe applied,
    without running it (Hydra's own `--cfg job` prints the composition before the recipe)."""
    import sys

    register_resolvers()
    args = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help"} & set(args):
        print("usage: python -m seqbench.compose [override ...]\n\n"
              "Prints the config `python src/train.py [override ...]` would run with: Hydra's composition,\n"
              "then the recipe of the data's task (the first line names the recipe).")
        raise SystemExit(0)
    cfg = compose_final(args)
    with_hydra = OmegaConf.to_container(cfg, resolve=False)
    with_hydra.pop("hydra", None)
    print(f"# {describe(cfg)}")
    print(OmegaConf.to_yaml(OmegaConf.create(with_hydra)), end="")


if __name__ == "__main__":
    main()
