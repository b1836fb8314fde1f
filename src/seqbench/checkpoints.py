"""Reading checkpoints without running code from them.

A `.ckpt` is a pickle, and unpickling may call any function the file names: a shared checkpoint can
run a command the moment it is loaded. So every checkpoint seqbench reads — `ckpt_path=` (resume,
and the test of the best checkpoint), `model.pretrained`, `data.tokenizer_from`, `src/eval.py` and
the analysis commands — is read by torch's weights-only unpickler, which rebuilds tensors and plain
containers, numbers and strings and refuses everything else before calling it.

What seqbench writes beside tensors is plain data for that reason: a pre-training run's tokenizer is
its JSON text, hyperparameters are dicts and lists (`SeqModel.on_save_checkpoint` passes them
through `to_plain`), RNG states are tensors and tuples, LR-schedule multipliers are stored by
torch's `LambdaLR` as their field dicts. A file holding any other object — a checkpoint from
another program, or one altered to run code — is refused in one sentence that names the
converter, `python -m seqbench.training.convert_checkpoint`, for files the user trusts.
"""

from __future__ import annotations

import dataclasses
import pickle
import re
import zipfile
from argparse import Namespace
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch

from seqbench.errors import UserError

CONVERTER = "python -m seqbench.training.convert_checkpoint"


class UnsafeCheckpointError(UserError):
    """A checkpoint names Python objects (functions, classes) that loading would have to call."""


class NotACheckpointError(UserError):
    """A file given as a checkpoint is not one torch can read."""


def load_checkpoint(path: str | Path, what: str | None = None, mmap: bool = False) -> Any:
    """`torch.load(path, weights_only=True)` on the CPU, with its refusals as one sentence.

    `what` names the file in that sentence as the user gave it (`model.pretrained=<path>`); by
    default the path. With `mmap` the tensors stay on disk until used: a cheap check up front.
    """
    p = Path(path).expanduser()
    what = what or f"the checkpoint {path}"
    try:
        return torch.load(p, map_location="cpu", weights_only=True, mmap=mmap and zipfile.is_zipfile(p))
    except pickle.UnpicklingError as exc:
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))  # the function or class the file would have us call
        if found is None:  # text, a truncated file, an opcode torch's checker does not take
            raise NotACheckpointError(_not_a_checkpoint(what, exc)) from None
        named = f" ({found.group(1)})"
        raise UnsafeCheckpointError(
            f"{what} holds a Python object{named} that loading would have to call, so it may run code "
            f"and seqbench will not load it; if you trust the file (e.g. written by an older seqbench), convert "
            f"it with `{CONVERTER} {path} <new.ckpt>` and pass the new file."
        ) from None
    except (EOFError, KeyError, OSError, RuntimeError, ValueError, zipfile.BadZipFile) as exc:
        raise NotACheckpointError(_not_a_checkpoint(what, exc)) from None


def load_weights(model: torch.nn.Module, path: str | Path, what: str | None = None) -> None:
    """Load a checkpoint's `state_dict` into `model` (the analysis commands' way to read a run)."""
    ckpt = load_checkpoint(path, what)
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise NotACheckpointError(f"{what or f'the checkpoint {path}'} holds no state_dict; give a .ckpt written "
                                  f"by a seqbench run.")
    model.load_state_dict(ckpt["state_dict"])


def _not_a_checkpoint(what: str, exc: BaseException) -> str:
    if isinstance(exc, (KeyError, EOFError)):  # torch's legacy reader met a byte that starts no pickle
        reason = "neither a zip archive nor a pickle"
    elif isinstance(exc, pickle.UnpicklingError):
        reason = "a pickle that torch's weights-only reader does not take"
    elif isinstance(exc, OSError):  # torch's zip reader on a cut-off file
        reason = f"a damaged or truncated file: {exc}"
    else:  # a damaged zip archive, ...
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:120]
    return f"{what} is not a checkpoint torch can read ({reason}); give a .ckpt written by a seqbench run."


def check_checkpoint(path: str | Path | None, what: str | None = None) -> None:
    """Refuse an unsafe or unreadable checkpoint before any work (tensors are not read)."""
    if path and Path(path).expanduser().is_file():
        load_checkpoint(path, what, mmap=True)


# -- plain data --------------------------------------------------------------------------------------
_PLAIN = (str, int, float, bool, bytes, type(None), torch.Tensor, torch.Size, torch.dtype, torch.device)


def to_plain(obj: Any, where: str = "checkpoint", changed: list[str] | None = None) -> Any:
    """`obj` with every value the weights-only unpickler refuses turned into plain data.

    OmegaConf containers become dicts and lists, dataclasses and namespaces dicts, numpy arrays
    tensors, numpy scalars Python numbers, an HF `tokenizers.Tokenizer` its JSON text (what
    `Tokenizer.from_str` reads back). Anything else has no plain form and raises a UserError naming
    where it sits. `changed` collects "where: type" for each conversion, for the converter's report.
    """
    def note(kind: str) -> None:
        if changed is not None:
            changed.append(f"{where}: {kind}")

    if isinstance(obj, _PLAIN):
        return obj
    if type(obj) in (dict, OrderedDict):
        return type(obj)((k, to_plain(v, f"{where}.{k}", changed)) for k, v in obj.items())
    if type(obj) in (list, tuple):
        return type(obj)(to_plain(v, f"{where}[{i}]", changed) for i, v in enumerate(obj))
    kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if _is_omegaconf(obj):
        from omegaconf import OmegaConf

        note(kind)
        return to_plain(OmegaConf.to_container(obj, resolve=True), where, changed)
    if isinstance(obj, dict):  # a dict subclass (Lightning's AttributeDict, defaultdict, ...)
        note(kind)
        return {k: to_plain(v, f"{where}.{k}", changed) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):  # a namedtuple or list subclass
        note(kind)
        return [to_plain(v, f"{where}[{i}]", changed) for i, v in enumerate(obj)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        note(kind)
        return to_plain({f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}, where, changed)
    if isinstance(obj, Namespace):
        note(kind)
        return to_plain(vars(obj), where, changed)
    if type(obj).__module__.split(".")[0] == "numpy":
        import numpy as np

        if isinstance(obj, np.ndarray) and obj.dtype != object:
            note(kind)
            return torch.from_numpy(obj.copy())
        if isinstance(obj, np.generic) and not isinstance(obj, np.object_):
            note(kind)
            return obj.item()
    if type(obj).__module__.startswith("tokenizers") and callable(getattr(obj, "to_str", None)):
        note(kind)
        return obj.to_str()
    raise UserError(f"{where} holds a {kind}, which has no plain-data form; seqbench cannot convert this "
                    f"checkpoint (load it in the program that wrote it and save its tensors with torch.save).")


def _is_omegaconf(obj: Any) -> bool:
    try:
        from omegaconf import Container
    except ImportError:
        return False
    return isinstance(obj, Container)
