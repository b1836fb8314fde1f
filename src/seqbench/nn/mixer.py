"""The sequence-mixer interface: a layer from outside the package, named by its import path (issue 65).

    python src/train.py model=mixer model.mixer=mypkg.layers:MyMixer data=ptb

A mixer is a `torch.nn.Module` class that maps a sequence to a sequence of the same width. seqbench builds
it as `MyMixer(d_model, **model.mixer_options)` and stacks `model.num_layers` of them in the backbone the
parallel recurrences use (`seqbench.nn.parallel_stack`: embedding -> pre-norm residual blocks -> LayerNorm
-> the task's head), so it trains on every task those families do: language models, classifiers, taggers,
regression and images read as sequences. Everything but the mixer is seqbench's.

**The interface.** Shapes are batch first, d = d_model:

    forward(x, state=None) -> (y, state)      x, y: (B, T, d); state: None at a sequence's start
    step(x_t, state=None) -> (y_t, state)     x_t, y_t: (B, d): one token (optional)
    stateless = True                          (optional) forward(x) -> y reads only the window it is given
    train_flops_per_token(length) -> float    (optional) its training FLOPs per token at sequences of `length`

- **State** is what a recurrent layer carries: a tensor or a (nested) tuple of tensors, each with the batch in
  dimension 0, or None. On a language model the backbone reads a corpus as contiguous streams in
  truncated-BPTT windows and hands each window the state the previous one returned (detached), so a
  stateful mixer sees everything before a window, as the LSTM and minGRU do. States are saved in
  checkpoints and split across DDP ranks along dimension 0.
- **Stateless** mixers (a convolution over the window, attention within it) say `stateless = True` and
  implement `forward(x) -> y`. On a language model each window is then read alone. A mixer whose forward
  takes no state and does not say it is stateless is refused on a language model's stream, in one
  sentence before training: silently dropping the state would score every window as a fresh start.
- **step** is the O(1)-per-token form for generation. Without it a stateful mixer steps by calling
  `forward(x_t[:, None], state)`, and a stateless one re-reads the whole prefix each token.
- **FLOPs**: a compute budget (`budget.flops`) needs the training FLOPs per token. A mixer may give its own
  formula; without one, seqbench measures one training step with `torch.utils.flop_counter.FlopCounterMode`
  (`seqbench.nn.flop_count`), and the run's record says `"flops_source": "measured"`. The counter sees
  matmuls, convolutions and attention kernels that dispatch through aten; a fused kernel opaque to it
  (oneDNN's LSTM, a custom CUDA op) counts 0.

A minimal stateful mixer, a gated linear recurrence h_t = a * h_{t-1} + (1 - a) * W x_t, y_t = h_t:

    class Leaky(nn.Module):
        def __init__(self, d_model):
            super().__init__()
            self.proj, self.logit = nn.Linear(d_model, d_model), nn.Parameter(torch.zeros(d_model))

        def forward(self, x, state=None):
            a, u = torch.sigmoid(self.logit), self.proj(x)   # (d,), (B, T, d)
            h = torch.zeros_like(u[:, 0]) if state is None else state
            ys = []
            for t in range(x.size(1)):
                h = a * h + (1 - a) * u[:, t]
                ys.append(h)
            return torch.stack(ys, 1), h

`examples/lru.py` is a worked one (the Linear Recurrent Unit, with a parallel scan and a step form).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys

import torch
from torch import Tensor, nn

from seqbench.errors import ConfigError


def resolve(path: str, option: str = "model.mixer") -> type[nn.Module]:
    """`package.module:Class` (or `package.module.Class`) -> the class; one sentence when it cannot be had.

    The working directory is searched too, as `python -m` would, so a layer in ./mypkg/layers.py is found
    from the folder that holds mypkg."""
    if not isinstance(path, str) or not path.strip():
        raise ConfigError(f"{option} must name a layer class by its import path, e.g. {option}=mypkg.layers:MyMixer.")
    module_name, sep, name = path.partition(":")
    if not sep:
        module_name, _, name = path.rpartition(".")
    if not module_name or not name:
        raise ConfigError(f"{option}={path} is not an import path: write it as package.module:Class.")
    try:
        module = _import(module_name)
    except ModuleNotFoundError as exc:
        raise ConfigError(f"{option}={path} cannot be imported: there is no module {exc.name!r} on the Python path "
                          f"(run from the folder that holds it, add it to PYTHONPATH, or pip install it).") from None
    except Exception as exc:  # the module itself fails while it is imported
        raise ConfigError(f"{option}={path}: importing {module_name} failed ({type(exc).__name__}: {exc}).") from None
    cls = getattr(module, name, None)
    if cls is None:
        raise ConfigError(f"{option}={path}: the module {module_name} has no {name!r}.")
    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        raise ConfigError(f"{option}={path} is not a torch.nn.Module class; a mixer is one (seqbench.nn.mixer).")
    return cls


def _import(module_name: str):
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        cwd = os.getcwd()
        if cwd in sys.path or not (exc.name and module_name.startswith(exc.name.split(".")[0])):
            raise
        sys.path.append(cwd)  # what `python -m` would search: the folder the command was run from
        return importlib.import_module(module_name)


def is_stateless(cls: type) -> bool:
    """The class says it reads only the window it is given (`stateless = True`)."""
    return bool(getattr(cls, "stateless", False))


def takes_state(cls: type) -> bool:
    """Its forward accepts a state after the sequence: forward(x, state=None)."""
    params = [p for p in inspect.signature(cls.forward).parameters.values() if p.name != "self"]
    return len(params) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)


def check_streams(cls: type, path: str) -> None:
    """A language model's stream carries a state across windows: the mixer must take one, or say it needs none."""
    if not is_stateless(cls) and not takes_state(cls):
        raise ConfigError(
            f"model.mixer={path} cannot read a language model's stream: its forward(x) takes no state to carry "
            "from one truncated-BPTT window to the next. Give it forward(x, state=None) -> (y, state), or set "
            "`stateless = True` on the class if it reads only the window it is given (each window is then read "
            "alone).")


class MixerLayer(nn.Module):
    """A user's mixer behind the interface the residual blocks call: forward(x, state) and step(x_t, state),
    both -> (y, state), whatever of the optional parts it has."""

    def __init__(self, cls: type[nn.Module], d_model: int, path: str, **options):
        super().__init__()
        try:
            self.inner = cls(d_model, **options)
        except TypeError as exc:
            raise ConfigError(f"model.mixer={path} could not be built as {cls.__name__}(d_model={d_model}"
                              f"{''.join(f', {k}={v!r}' for k, v in options.items())}): {exc}.") from None
        self.path = path
        self.stateless = is_stateless(cls)
        self.stateful = takes_state(cls) and not self.stateless

    def forward(self, x: Tensor, state=None):
        if not self.stateful:
            return self._checked(self.inner(x), x), None
        out = self.inner(x, state)
        if not isinstance(out, tuple) or len(out) != 2:
            raise ConfigError(f"model.mixer={self.path}: forward(x, state) returned {type(out).__name__}, not "
                              "(y, state); a mixer that takes a state returns the new one (or set stateless = True).")
        return self._checked(out[0], x), out[1]

    def step(self, x_t: Tensor, state=None):
        """One token (B, d) -> (y_t, state): the mixer's own step, else its forward over a window of one."""
        if hasattr(self.inner, "step"):
            return self.inner.step(x_t, state)
        if not self.stateful:
            raise NotImplementedError("a stateless mixer has no step: its model re-reads the prefix")
        y, state = self.forward(x_t[:, None], state)  # (B, 1, d)
        return y[:, 0], state

    def _checked(self, y, x: Tensor) -> Tensor:
        if not isinstance(y, Tensor) or y.shape != x.shape:
            got = tuple(y.shape) if isinstance(y, Tensor) else type(y).__name__
            raise ConfigError(f"model.mixer={self.path} maps (B, T, d) = {tuple(x.shape)} to {got}; a mixer keeps "
                              "the sequence's shape (seqbench.nn.mixer).")
        return y

    def train_flops_per_token(self, length: int) -> float | None:
        """The mixer's own formula, when it has one."""
        formula = getattr(self.inner, "train_flops_per_token", None)
        return float(formula(length)) if callable(formula) else None


def mixer_stateless(layer: nn.Module) -> bool:
    return isinstance(layer, MixerLayer) and not layer.stateful


def tokens_for(vocab_size: int, batch: int, length: int, device: torch.device) -> Tensor:
    """Deterministic token ids (B, T) for a measurement: they draw nothing from the RNG a run is seeded with."""
    return (torch.arange(batch * length, device=device).view(batch, length) * 7919) % vocab_size
