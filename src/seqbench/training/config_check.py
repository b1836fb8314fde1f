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


# Ranges of the numeric options a user sets, by option name: a negative batch size or a dropout of 1.5
# would otherwise fail minutes later inside PyTorch, or train silently wrong. `None` is judged by the
# type hints above (it means "unset" wherever it is allowed).
_POSITIVE_INTS = {
    "T", "batch_size", "eval_batch_size", "bptt", "context", "d_model", "d_ff", "d_kv", "n_layer", "n_dec_layer",
    "n_head", "num_layers", "hidden_size", "embedding_size", "attention_size", "char_embedding_size", "hidden",
    "head_hidden", "states", "beam_size", "val_beam_size", "copy_length", "num_symbols", "num_pairs", "num_keys",
    "num_values", "patch_size", "max_len", "max_train_len", "max_word_len", "vocab_size", "tgt_vocab_size",
    "bpe_vocab", "tokenizer_vocab", "max_vocab", "bucket_pool", "num_buckets", "max_distance", "sentinels",
    "convs_per_block", "train_size", "val_size", "test_size", "max_pairs", "eval_stride", "min_freq",
}
_RANGES: list[tuple[typing.Callable[[str], bool], typing.Callable[[float], bool], str]] = [
    (lambda k: k in _POSITIVE_INTS, lambda v: v >= 1, "at least 1"),
    (lambda k: k == "dropout" or k.endswith("_dropout"), lambda v: 0 <= v < 1, "in [0, 1)"),
    (lambda k: k in {"label_smoothing", "unk_replace", "noise_density", "min_ratio"}, lambda v: 0 <= v < 1,
     "in [0, 1)"),
    (lambda k: k in {"mask_prob", "factor"}, lambda v: 0 < v <= 1, "in (0, 1]"),
    (lambda k: k == "teacher_forcing", lambda v: 0 <= v <= 1, "in [0, 1]"),
    (lambda k: k in {"lr", "mean_span", "init_std"}, lambda v: v > 0, "positive"),
    (lambda k: k in {"weight_decay", "warmup_steps", "max_len_a", "max_len_b", "length_penalty", "init_range",
                     "char_features", "shift", "num_workers", "start_epoch", "patience", "aux_lm_weight",
                     "emission_smoothing", "transition_smoothing", "val_bleu_every_n_epochs"},
     lambda v: v >= 0, "0 or more"),
]


def check_range(where: str, value) -> None:
    """One sentence when a numeric option is outside the values it can take."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    key = where.rsplit(".", 1)[-1]
    for applies, ok, expected in _RANGES:
        if applies(key) and not ok(value):
            raise ConfigError(f"{where} must be {expected}, got {value!r}.")


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
        check_range(where, value)
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
    choices = choices or {}
    model = choices.get("model") or model_cls.__name__
    data = choices.get("data") or data_cls.__name__
    if task not in supported:
        raise ConfigError(
            f"model={model} cannot be trained on data={data}: the data poses the task {task!r}, and the "
            f"{model_cls.__name__} family supports {', '.join(supported) or 'no task'}."
        )
    if task in getattr(model_cls, "needs_words", ()) and not getattr(data_cls, "serves_words", False):
        raise ConfigError(
            f"model={model} reads the words of a {task} corpus, and data={data} serves token ids only; use a "
            f"sentence corpus (data=sst2, data=conll2003)."
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
