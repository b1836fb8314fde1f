"""The sizing solver: the width at which a family meets a comparison's size target (issue 65).

A comparison matches its families by size: the same parameters without embeddings, or the same
training FLOPs per token where it is compute-matched (`seqbench.presets.comparisons`). A family declares the
model keys of its width (`seqbench.families.Family.width`); the solver builds the family's model at
trial widths and picks the one whose count is nearest the target. Counts grow with width, so a
bisection finds the first width at or above the target and the nearest is it or the one below.
Integer widths (multiples of `step` where heads must divide the width) cannot always land within the
tolerance (1 %): the solution says so (`within`), and the caller writes it into the preset's comment.

The counts come from the model itself (`num_params(non_embedding=True)`, `flops_per_token`), not from
a formula of our own, so a layer from outside the package (`model=mixer`) is sized by the same code:
its FLOPs without a formula are measured (`seqbench.nn.flop_count`). A model is built on PyTorch's
meta device where it can be (no memory, no initialisation: a 100M-parameter trial costs
milliseconds), else on the CPU.

The same solver runs at two times: when `python -m seqbench.presets --write` derives the presets of
the built-in families (their widths are then written into the files, so composing a run solves
nothing), and when a run with a `sizing:` node starts (`sizing.params=...` or `sizing.flops=...`: the
presets of `model=mixer`, whose layer is known only from the command line; `apply_sizing` below, called
by `seqbench.training.run.build` once the data is set up, before the model is built). Composing such a config
(`python -m seqbench.compose`) shows the target, not yet the width.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf, open_dict

from seqbench.errors import ConfigError

log = logging.getLogger(__name__)

TOLERANCE = 0.01  # a family within 1 % of the target counts as matched (the presets' rule since issue 35)


@dataclass(frozen=True)
class Solution:
    """The chosen width, its count, the target and how far apart they are."""

    width: int
    count: float
    target: float
    tolerance: float = TOLERANCE

    @property
    def deviation(self) -> float:
        """count / target - 1 (+0.003 is 0.3 % above)."""
        return self.count / self.target - 1

    @property
    def within(self) -> bool:
        return abs(self.deviation) <= self.tolerance

    def describe(self, what: str = "parameters without embeddings") -> str:
        verdict = "" if self.within else f", the nearest integer width (outside {self.tolerance:.0%})"
        return f"width {self.width}: {self.count:,.0f} {what}, {self.deviation:+.2%} from the target {self.target:,.0f}{verdict}"


def solve(count: Callable[[int], float], target: float, step: int = 1, largest: int = 1 << 14,
          tolerance: float = TOLERANCE, guess: int = 64) -> Solution:
    """The width (a positive multiple of `step`, at most `largest`) whose `count(width)` is nearest `target`;
    `count` must grow with the width. Ties go to the narrower width.

    Each count builds a model, so the search first jumps: counts grow about as the width squared (every
    matrix is width x width), so width x sqrt(target / count) lands within a few steps of the answer in
    two or three jumps. It then walks to the pair of neighbours that bracket the target, which is exact
    whatever the count's shape, as long as it grows."""
    if target <= 0:
        raise ValueError(f"a size target must be positive, got {target}")
    top = max(1, largest // step)  # widths k*step for k = 1 .. top
    k = min(top, max(1, round(guess / step)))
    for _ in range(8):  # jumps
        c = count(k * step)
        nxt = min(top, max(1, round(k * (target / c) ** 0.5)))
        if nxt == k:
            break
        k = nxt
    while count(k * step) < target:  # walk up to the first width that reaches the target ...
        if k == top:
            raise ConfigError(f"no width up to {k * step} reaches the size target {target:,.0f} (the widest counts "
                              f"{count(k * step):,.0f}): the target is too large for this family's depth.")
        k += 1
    while k > 1 and count((k - 1) * step) >= target:  # ... or down to it
        k -= 1
    above = Solution(k * step, count(k * step), target, tolerance)
    if k == 1:
        return above
    below = Solution((k - 1) * step, count((k - 1) * step), target, tolerance)
    return below if abs(below.count - target) <= abs(above.count - target) else above


def with_width(model: DictConfig, keys: tuple[str, ...], width: int, depth: tuple[str, int] | None = None) -> DictConfig:
    """A copy of a model config with each width key set to `width` (and the depth key, when given)."""
    node = OmegaConf.create(OmegaConf.to_container(model, resolve=True))
    with open_dict(node):
        for key in keys:
            node[key] = width
        if depth is not None:
            node[depth[0]] = depth[1]
    return node


def build(model: DictConfig, spec):
    """The model of a config on the meta device (no memory, no init), or on the CPU where a layer cannot be
    built there (one that reads a tensor's values while it initialises)."""
    import hydra
    import torch

    try:
        with torch.device("meta"):
            return hydra.utils.instantiate(model, spec=spec)
    except ConfigError:
        raise
    except Exception:  # e.g. an init that calls .item(): the CPU builds it for real
        return hydra.utils.instantiate(model, spec=spec)


def counter(model: DictConfig, spec, keys: tuple[str, ...], match: str = "params", length: int | None = None,
            depth: tuple[str, int] | None = None) -> Callable[[int], float]:
    """width -> the family's count at that width: parameters without embeddings, or training FLOPs per token
    at sequences of `length` (`match="flops"`)."""
    if match not in ("params", "flops"):
        raise ValueError(f"a size target matches 'params' or 'flops', not {match!r}")
    cache: dict[int, float] = {}

    def count(width: int) -> float:
        if width not in cache:
            node = with_width(model, keys, width, depth)
            if match == "params":
                cache[width] = build(node, spec).num_params(non_embedding=True)
            else:
                import hydra

                flops = hydra.utils.instantiate(node, spec=spec).flops_per_token(length)  # measured ones need weights
                if flops is None:
                    raise ConfigError(f"{node._target_} counts no FLOPs on {spec.task!r}: a FLOPs target needs a "
                                      "language model.")
                cache[width] = flops
        return cache[width]

    return count


def apply_sizing(cfg: DictConfig, spec_of: Callable[[DictConfig], object] | None = None) -> Solution | None:
    """Solve the width of a run composed with a `sizing:` node and write it into `cfg.model`.

    `sizing.params` (or `sizing.flops`, training FLOPs per token at the data's training length) is the target;
    the family's width keys come from the registry (`seqbench.families`), `sizing.keys` overrides them. The
    solution is kept in the config (`sizing.width`, `sizing.count`, `sizing.deviation`) so the run's saved
    config and its log say what was chosen. `spec_of(cfg)` gives the data's TaskSpec (default: the DataModule's,
    set up once)."""
    sizing = cfg.get("sizing")
    if not sizing or sizing.get("width") is not None:
        return None
    from seqbench.families import family_of, FAMILIES

    match = "flops" if sizing.get("flops") is not None else "params"
    target = sizing.get(match)
    if target is None:
        raise ConfigError("sizing needs a target: sizing.params=<parameters without embeddings> or "
                          "sizing.flops=<training FLOPs per token>.")
    family = FAMILIES.get(family_of(cfg.model))
    keys = tuple(sizing.get("keys") or ()) or (family.width if family else ())
    if not keys:
        raise ConfigError(f"sizing: the family {family_of(cfg.model)!r} declares no width in seqbench.families; "
                          "name the model keys to size with sizing.keys=[d_model].")
    spec = (spec_of or data_spec)(cfg)
    length = cfg.data.get("bptt") or cfg.model.get("context")
    tied = family.tied if family and cfg.model.get("tie_weights") else ()
    step = int(cfg.model.get(family.heads)) if family and family.heads else 1
    solution = solve(counter(cfg.model, spec, (*keys, *tied), match, length), float(target), step,
                     tolerance=float(sizing.get("tolerance") or TOLERANCE))
    with open_dict(cfg):
        for key in (*keys, *tied):
            cfg.model[key] = solution.width
        cfg.sizing.width, cfg.sizing.count = solution.width, float(solution.count)
        cfg.sizing.deviation = round(solution.deviation, 6)
    log.info("sizing: %s", solution.describe("parameters without embeddings" if match == "params"
                                             else "training FLOPs per token"))
    return solution


def data_spec(cfg: DictConfig):
    """The TaskSpec of the run's data: its DataModule set up as the run will set it up."""
    import hydra

    datamodule = hydra.utils.instantiate(cfg.data)
    datamodule.prepare_data()
    datamodule.setup("fit")
    return datamodule.spec
