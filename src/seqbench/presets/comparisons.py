"""The comparisons, declared once: what each one matches its families on, and at which sizes (issue 65).

A comparison is a folder of presets, `conf/preset/<name>/<family>.yaml`, one per family that declares a
width (`seqbench.families`): `preset=ptb/lstm`, `preset=frontier/ptb/gpt size=m`. Those files are
derived, not written: `python -m seqbench.presets --write` generates them from this registry, and
tests/test_presets_current.py fails when one is stale. What a preset holds comes from three places:

- **how a family trains in this comparison** (optimizer, schedule, batches, depth, dropout): a recipe
  file `conf/comparison/<name>/<family>.yaml`, hand-written once per training style, not per family:
  a family without one takes its base family's (`Family.base`: minLSTM and the SSM train as minGRU does,
  GRU and RNN as the LSTM), and a comparison on another's recipes (`base`: the frontier on PTB) has none;
  the learning rate itself is the task's recipe's (`conf/recipe/<task>/<family>.yaml`), stated there once;
- **its size**: each size declares a target, the count of an anchor family at a given width (the GPT at
  d_model 128 on PTB; the LSTM at 16 ... 256 units on the frontier) or a number; the solver
  (`seqbench.presets.sizing`) picks every other family's width nearest the target, in parameters without
  embeddings (`match="params"`) or training FLOPs per token (`match="flops"`, a compute-matched one);
- **pinned widths**: where runs were recorded at a width chosen by hand before the solver existed, and
  the solver would pick another, the recorded width is kept and the pin says why (`PINNED`): changing it
  would change what the recorded runs' presets resolve to (the sweep archive finds jobs by their
  overrides, and tests/test_presets_unchanged.py compares them key by key).

Adding a comparison: an entry here and, where its families train differently from an existing one, its
recipe files under conf/comparison/<name>/.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Size:
    """One size of a comparison: the target every family's width is solved for."""

    anchor: str | None = None     # the family whose count at `width` is the target; it is written at that width
    width: int | None = None
    target: float | None = None   # or the target itself (parameters without embeddings, or FLOPs per token)
    depth: Mapping[str, int] = field(default_factory=dict)  # kind ("attention") -> its layers at this size

    def __post_init__(self):
        if (self.target is None) == (self.anchor is None or self.width is None):
            raise ValueError("a size is an anchor family at a width, or a target count: give one of the two")


@dataclass(frozen=True)
class Pin:
    """A width kept as recorded against the solver's choice."""

    width: int
    reason: str


@dataclass(frozen=True)
class Comparison:
    name: str                          # the preset folder: preset=<name>/<family>
    about: str                         # the presets' first comment line
    sizes: Mapping[str, Size]          # "" for a comparison of one size; else the `size=` table (xxs .. l)
    default_size: str | None = None    # the `size:` a preset of a table composes to unless told
    base: str | None = None            # presets include preset=<base>/<family> (the frontier on PTB's recipes)
    match: str = "params"              # "params": without embeddings; "flops": training FLOPs per token
    context: tuple[str, ...] = ()      # overrides that give its presets their data (the probes: an experiment)
    tasks: tuple[str, ...] = ("lm",)   # the tasks its data poses: a family gets presets here if it supports them
    # the frontier: where a family's recipe warms up (not the classic RNNs' step decay on PTB), its warmup
    # takes at most this part of a run, so that a small budget's short run is not all warmup
    warmup_fraction: float | None = None


_FRONTIER_DEPTH = {"xxs": 2, "xs": 2, "s": 2, "m": 3, "l": 4}  # the attention stacks deepen as they grow


def _frontier(anchors: Mapping[str, tuple[str, int]]) -> dict[str, Size]:
    """The frontier's sizes: an anchor family at a width for each, attention at its depth for that size."""
    return {size: Size(family, width, depth={"attention": _FRONTIER_DEPTH[size]})
            for size, (family, width) in anchors.items()}


COMPARISONS: dict[str, Comparison] = {c.name: c for c in (
    Comparison("ptb", "PTB at ~0.6M parameters without embeddings, beside the GPT of 3 layers x 4 heads x 128",
               {"": Size("gpt", 128)}),
    Comparison("shakespeare", "Tiny Shakespeare beside nanoGPT's CPU GPT (4 layers x 4 heads x 128)",
               {"": Size("gpt", 128)}),
    Comparison("probe", "Synthetic probes (experiment=long_range) at ~75k parameters, beside the LSTM of 128 units "
               "on copy", {"": Size("lstm", 128)}, context=("experiment=long_range",),
               tasks=("tagging", "classification", "regression")),
    Comparison("frontier/ptb", "experiment=frontier_ptb: PTB at five sizes (`size=xxs|xs|s|m|l`), the LSTM's at "
               "16 ... 256 units", _frontier({"xxs": ("lstm", 16), "xs": ("lstm", 32), "s": ("lstm", 64),
                                              "m": ("lstm", 128), "l": ("lstm", 256)}),
               default_size="m", base="ptb", warmup_fraction=0.1),
    # its largest size is the Shakespeare comparison's (the GPT at 128: the shakespeare_families presets)
    Comparison("frontier/shakespeare", "experiment=frontier: Tiny Shakespeare at five sizes (`size=xxs|xs|s|m|l`), "
               "the LSTM's at 14 ... 112 units, then nanoGPT's CPU GPT", _frontier(
                   {"xxs": ("lstm", 14), "xs": ("lstm", 28), "s": ("lstm", 56), "m": ("lstm", 112), "l": ("gpt", 128)}),
               default_size="m", base="shakespeare", warmup_fraction=0.1),
)}


# Widths chosen by hand before the solver (issues 35, 36, 64), where it would pick another: each was trained in
# recorded runs that the pages, the sweep archive and the background campaign find by their preset's name, so the
# preset keeps resolving to it. `python -m seqbench.presets` prints each beside the solver's width.
_MEAN = ("recorded runs used it: chosen by hand before the solver, nearest the mean of the LSTM's and the GPT's "
         "counts at this size")
_ATTENTION = "recorded runs used it: the frontier's hand-chosen attention widths (2/3/4 layers), before the solver"
_PROBE = "the long-range records ran at this round width, chosen by hand before the solver (experiments/long-range.md)"
PINNED: dict[tuple[str, str, str], Pin] = {
    ("ptb", "rnn", ""): Pin(381, "the ptb_families records ran at 381 (within 1 %), chosen by hand before the solver"),
    ("probe", "rnn", ""): Pin(256, _PROBE),
    ("probe", "gru", ""): Pin(148, _PROBE),
    ("probe", "transformer", ""): Pin(64, _PROBE + "; 2 x 4 heads x 64, d_ff 128, as the attention probes were set"),
    ("probe", "gpt", ""): Pin(64, _PROBE + "; 2 x 4 heads x 64, as the attention probes were set"),
    **{("frontier/ptb", family, size): Pin(width, _MEAN) for family, size, width in (
        ("mingru", "m", 210), ("mingru", "l", 412), ("minlstm", "m", 172), ("minlstm", "l", 336),
        ("ssm", "m", 111), ("ssm", "l", 225))},
    **{("frontier/ptb", family, "l"): Pin(144, _ATTENTION) for family in ("transformer", "gpt")},
    **{("frontier/shakespeare", family, size): Pin(width, _MEAN) for family, size, width in (
        ("mingru", "s", 93), ("mingru", "m", 189), ("minlstm", "s", 76), ("minlstm", "m", 154),
        ("ssm", "s", 45), ("ssm", "m", 99))},
    **{("frontier/shakespeare", family, size): Pin(width, _ATTENTION) for family, size, width in (
        ("transformer", "s", 48), ("transformer", "m", 80), ("gpt", "m", 80))},
    **{("frontier/shakespeare", "gru", size): Pin(width, "recorded runs used it: the GRU at 64 and 128 units, "
                                                          "chosen by hand before the solver")
       for size, width in (("s", 64), ("m", 128))},
}


def comparison(name: str) -> Comparison:
    if name not in COMPARISONS:
        raise KeyError(f"no comparison {name!r}; the comparisons are {', '.join(COMPARISONS)}")
    return COMPARISONS[name]


def ordered() -> list[Comparison]:
    """The comparisons with each after its base (the frontier's presets include PTB's)."""
    out: list[Comparison] = []

    def add(c: Comparison) -> None:
        if c.base:
            add(COMPARISONS[c.base])
        if c not in out:
            out.append(c)

    for c in COMPARISONS.values():
        add(c)
    return out


def pin(comparison_name: str, family: str, size: str) -> Pin | None:
    return PINNED.get((comparison_name, family, size))
