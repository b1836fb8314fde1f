"""Fail before any work starts: unknown options, wrong types, impossible model/data pairs.

Hydra composes whatever it is given, and a wrong value would otherwise surface minutes later as a
traceback from inside PyTorch. These checks read the constructor signature of each `_target_` and
compare the config against it, so `model.hidden_size=abc` or `model.hiden_size=200` ends in one
sentence before a corpus is even read.
"""

from __future__ import annotations

import inspect
import os
import types
import typing
from pathlib import Path

from hydra.utils import get_class, get_method
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError, MissingMandatoryValue

from seqbench.checkpoints import check_checkpoint
from seqbench.errors import ConfigError

_HYDRA_KEYS = {"_target_", "_partial_", "_recursive_", "_convert_", "_args_"}


def _target(path: str, name: str):
    try:
        obj = get_method(name)
    except Exception:
        try:
            obj = get_class(name)
        except Exception as exc:
            raise ConfigError(f"{path}._target_={name} cannot be imported ({exc}).") from None
    return obj


def _signature(obj) -> tuple[dict[str, inspect.Parameter], dict[str, object], bool]:
    """Parameters, type hints and whether extra keywords are accepted, following **kwargs up the MRO."""
    params: dict[str, inspect.Parameter] = {}
    hints: dict[str, object] = {}
    callables = [c.__init__ for c in inspect.getmro(obj) if "__init__" in vars(c)] if inspect.isclass(obj) else [obj]
    for fn in callables:
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return params, hints, True
        try:
            hints.update({k: v for k, v in typing.get_type_hints(fn).items() if k not in hints})
        except Exception:  # unresolvable annotations: check names only
            pass
        for name, p in sig.parameters.items():
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name != "self":
                params.setdefault(name, p)
        if not any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
            return params, hints, False
    return params, hints, True


def _describe(hint) -> str:
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(hint, str(hint))


def _matches(value, hint) -> bool | None:
    """True/False for hints we can judge; None when the hint is too rich to check here."""
    if hint is typing.Any or hint is inspect.Parameter.empty:
        return None
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        verdicts = [_matches(value, arg) for arg in typing.get_args(hint)]
        if any(v is True for v in verdicts):
            return True
        return None if any(v is None for v in verdicts) else False
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin in (list, tuple) or hint in (list, tuple):
        return isinstance(value, (list, tuple, ListConfig))
    if origin is dict or hint is dict:
        return isinstance(value, (dict, DictConfig))
    return None


def _expected(hint) -> str:
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return "one of " + ", ".join(map(str, typing.get_args(hint)))
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if a is type(None) else _expected(a) for a in typing.get_args(hint))
    return _describe(hint)


def check_node(node: DictConfig, path: str) -> None:
    """Check one instantiable node (and nested ones) against its target's signature."""
    target = node.get("_target_")
    if target is None:
        for key in node:
            child = node._get_node(key)
            if isinstance(child, DictConfig) and "_target_" in child:
                check_node(child, f"{path}.{key}")
        return
    obj = _target(path, target)
    params, hints, open_kwargs = _signature(obj)
    for key in node:
        if key in _HYDRA_KEYS:
            continue
        where = f"{path}.{key}"
        if key not in params and not open_kwargs:
            raise ConfigError(f"{where} is not an option of {target}; its options are {', '.join(params)}.")
        try:
            value = node[key]
        except MissingMandatoryValue:
            raise ConfigError(f"{where} must be set (it has no default); add {where}=... to the command.") from None
        except InterpolationResolutionError as exc:
            raise ConfigError(f"{where} could not be resolved: {exc}.") from None
        if isinstance(value, DictConfig) and "_target_" in value:
            check_node(value, where)
            continue
        if isinstance(value, (DictConfig, ListConfig)):
            value = OmegaConf.to_container(value, resolve=True)
        verdict = _matches(value, hints.get(key, inspect.Parameter.empty))
        if verdict is False:
            raise ConfigError(f"{where} must be {_expected(hints[key])}, got {value!r}.")
    if not node.get("_partial_", False) and inspect.isclass(obj):
        own = inspect.signature(obj).parameters  # a parent's required args are the child's business
        required = [n for n, p in own.items() if p.default is p.empty and n not in node and n != "spec"
                    and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        if required:
            raise ConfigError(f"{path} needs {', '.join(f'{path}.{r}' for r in required)} to be set.")


def check_compatible(cfg: DictConfig, choices: dict | None = None) -> None:
    """The model family must support the task the data poses; checked before any data is read."""
    data_cls = _target("data", cfg.data._target_)
    model_cls = _target("model", cfg.model._target_)
    task = getattr(data_cls, "task", None)
    supported = model_cls.supported_tasks() if hasattr(model_cls, "supported_tasks") else ()
    if task not in supported:
        choices = choices or {}
        model = choices.get("model") or model_cls.__name__
        data = choices.get("data") or data_cls.__name__
        raise ConfigError(
            f"model={model} cannot be trained on data={data}: the data poses the task {task!r}, and the "
            f"{model_cls.__name__} family supports {', '.join(supported) or 'no task'}."
        )


def check_ckpt_path(ckpt_path: str | None) -> None:
    if ckpt_path and not Path(ckpt_path).is_file():
        raise ConfigError(
            f"ckpt_path={ckpt_path} does not exist (looked from {os.getcwd()}); give the path of a .ckpt "
            f"file of an earlier run, e.g. outputs/runs/<run>/checkpoints/last.ckpt."
        )
    check_checkpoint(ckpt_path, f"ckpt_path={ckpt_path}")


def check_checkpoint_options(cfg: DictConfig) -> None:
    """Every checkpoint the run will read is readable without running code from it (seqbench.checkpoints);
    a missing file is left to the option's own loader, whose sentence says what to give."""
    check_ckpt_path(cfg.get("ckpt_path"))
    for option in ("model.pretrained", "data.tokenizer_from"):
        path = OmegaConf.select(cfg, option, default=None)
        if isinstance(path, str) and not path.endswith(".json"):
            check_checkpoint(path, f"{option}={path}")


def check_config(cfg: DictConfig, choices: dict | None = None) -> None:
    """Everything that can be known to fail before training, in the order a user would fix it."""
    for group in ("data", "model", "trainer"):
        check_node(cfg[group], group)
    for group in ("callbacks", "logger"):
        if cfg.get(group):
            check_node(cfg[group], group)
    check_compatible(cfg, choices)
    check_checkpoint_options(cfg)
