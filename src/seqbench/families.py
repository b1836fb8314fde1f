"""The architecture families, declared once: everything that lists families reads `FAMILIES`.

A family is one row of the README's model x data matrix and one line in the comparisons: a
LightningModule (in `seqbench.models`) with its model config `conf/model/<name>.yaml`. Its entry says
what the rest of the code would otherwise type in a list of its own:

- **order and colour**: the registry's order is the order of tables and plots (recurrent, attention,
  images, statistical), and each family keeps one colour across every plot;
- **base**: the family whose recipe it takes for a task it has none of its own for
  (`seqbench.compose.recipe_name`: GRU and RNN train as the LSTM does unless they say otherwise);
- **tasks**: the tasks its module implements (`SeqModel.supported_tasks`, read from the class);
- **flops**: the formula of `seqbench.nn.flops` its `flops_per_token` follows (language models only);
- **kind**: `recurrent` or `attention`, the side it stands on in the comparisons' question (the findings'
  "best attention / best recurrent"), declared for every family that mixes tokens over time by one of the
  two, T5 and BERT included though they have no FLOPs formula; None for the CNN and the HMM;
- **compared**: whether it is one of the language-model families the comparisons sweep (the PTB and
  Shakespeare family sweeps, the FLOPs frontier, the long-range probes): their lists are
  `${families:<preset folder>}` in the experiment files (`presets`);
- **tiny**: overrides that shrink it to a model a CPU trains a step of in well under a second (the
  matrix's one-step check and the tests' per-family sizes);
- **extends**: a family that is another's model config with its module and selector keys set (a layer
  for `model=mixer`: `extends="mixer", selector={"mixer": "seqbench.nn.mylayer:MyLayer"}`; or a module of
  its own that takes the options of the config it extends) has its `conf/model/<name>.yaml` generated
  too (`python -m seqbench.presets --write`);
- **width, tied, depth, heads, table**: how it is sized (issue 65). `width` names the model keys the
  sizing solver (`seqbench.presets.sizing`) sets to one width, `tied` the keys that follow the width when the
  decoder is tied to the embedding (an LSTM's embedding_size), `depth` its number of layers (a
  comparison may set it per size: the attention stacks deepen along the frontier), `heads` the key
  whose value the width must be a multiple of, and `table` the name of the width in a preset's size
  table (`sizes.m.hidden` for the classic RNNs). A family that declares a width gets its presets for
  every comparison derived (`seqbench.presets.comparisons`, `python -m seqbench.presets --write`).

Adding a family: its `nn/` module, an entry here and its test file, where a layer in `model=mixer` is
enough (`extends="mixer"`: its model config is generated); else also its `models/` module, and its
`conf/model/<name>.yaml` unless its module takes the options of a config it can extend. Its presets
for every comparison are generated. `tests/test_families.py` registers a throwaway family from its own
file and sees it in the matrix, the sweeps, its derived presets and one training step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from seqbench.nn.flops import attention_forward_flops, parallel_recurrent_train_flops, recurrent_forward_flops

_SMALL_ATTENTION = ("model.n_layer=1", "model.n_head=2", "model.d_model=32")


@dataclass(frozen=True)
class Family:
    name: str                          # = conf/model/<name>.yaml
    module: str                        # the LightningModule's import path
    colour: str                        # matplotlib colour in every plot
    base: str | None = None            # whose recipe it takes where it has none of its own
    selector: Mapping[str, str] = field(default_factory=dict)  # model keys that tell it from a family sharing its module
    flops: Callable[..., int] | None = None  # seqbench.nn.flops formula of its flops_per_token (language models)
    kind: str | None = None            # "recurrent" or "attention": its side in the comparisons
    compared: bool = False             # one of the language-model families the comparisons sweep
    tiny: tuple[str, ...] = ()         # overrides for a model a CPU trains a step of at once
    width: tuple[str, ...] = ()        # model keys the sizing solver sets to one width (none: not sized)
    tied: tuple[str, ...] = ()         # keys that equal the width when the decoder is tied (tie_weights)
    depth: str | None = None           # model key of its number of layers
    heads: str | None = None           # model key of its head count: widths are multiples of it
    table: str = "width"               # the width's name in a preset's size table (sizes.<size>.<table>)
    extends: str | None = None         # conf/model/<name>.yaml is generated: this model config + its selector

    def __post_init__(self):
        # a language-model family (it has a FLOPs formula) stands on one side of the comparisons; left without
        # a kind, or with a misspelt one, the findings would leave it out of "best attention / best recurrent" unseen
        if self.kind not in (None, "recurrent", "attention"):
            raise ValueError(f"family {self.name!r}: kind {self.kind!r} is neither 'recurrent' nor 'attention'")
        if self.flops is not None and self.kind is None:
            raise ValueError(f"family {self.name!r} has a FLOPs formula but no kind: say kind='recurrent' or 'attention'")

    @property
    def cls(self) -> type:
        from hydra.utils import get_class

        return get_class(self.module)

    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks its module implements (a family supports a task exactly when it has its method)."""
        return self.cls.supported_tasks()


_RECURRENT = "seqbench.models.recurrent.RecurrentModel"
_TINY_RNN = ("model.hidden_size=16",)
# a recurrent stack's width is its hidden size; its embedding follows it where the decoder is tied
_RNN_SIZE = {"width": ("hidden_size",), "tied": ("embedding_size",), "depth": "num_layers", "table": "hidden"}
_PARALLEL = "seqbench.models.parallel_recurrent.ParallelRecurrentModel"
_TINY_PARALLEL = ("model.d_model=16", "model.d_state=4")
_PARALLEL_SIZE = {"width": ("d_model",), "depth": "num_layers"}
_ATTENTION_SIZE = {"width": ("d_model",), "depth": "n_layer", "heads": "n_head"}

FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("rnn", _RECURRENT, "C0", kind="recurrent", base="lstm", selector={"cell": "rnn"},
           flops=recurrent_forward_flops, compared=True, tiny=_TINY_RNN, **_RNN_SIZE),
    Family("lstm", _RECURRENT, "C1", kind="recurrent", selector={"cell": "lstm"},
           flops=recurrent_forward_flops, compared=True, tiny=_TINY_RNN, **_RNN_SIZE),
    Family("gru", _RECURRENT, "C2", kind="recurrent", base="lstm", selector={"cell": "gru"},
           flops=recurrent_forward_flops, compared=True, tiny=_TINY_RNN, **_RNN_SIZE),
    # the parallel recurrences (issue 35): recurrent nets, so a task without a recipe of their own takes the
    # LSTM's (a recurrent encoder's Adam recipes); their LM recipe is lm/mingru (AdamW + warmup-cosine, as
    # the papers train them, with stream batches)
    Family("mingru", _PARALLEL, "darkgoldenrod", kind="recurrent", base="lstm", selector={"layer": "mingru"},
           flops=parallel_recurrent_train_flops, compared=True, tiny=_TINY_PARALLEL,
           **_PARALLEL_SIZE),
    Family("minlstm", _PARALLEL, "teal", kind="recurrent", base="mingru", selector={"layer": "minlstm"},
           flops=parallel_recurrent_train_flops, compared=True, tiny=_TINY_PARALLEL,
           **_PARALLEL_SIZE),
    Family("ssm", _PARALLEL, "navy", kind="recurrent", base="mingru", selector={"layer": "ssm"},
           flops=parallel_recurrent_train_flops, compared=True, tiny=_TINY_PARALLEL,
           **_PARALLEL_SIZE),
    # Mamba-2's SSD (issue 69): not compared until its frontier presets are sized by the sizing work
    Family("ssd", _PARALLEL, "royalblue", kind="recurrent", base="mingru", selector={"layer": "ssd"},
           flops=parallel_recurrent_train_flops, tiny=(*_TINY_PARALLEL, "model.headdim=8")),
    Family("transformer", "seqbench.models.transformer.TransformerModel", "C3", kind="attention", base="gpt",
           flops=attention_forward_flops, compared=True, tiny=(*_SMALL_ATTENTION, "model.context=32"),
           **_ATTENTION_SIZE),
    Family("gpt", "seqbench.models.gpt.GPTModel", "C4", kind="attention",
           flops=attention_forward_flops, compared=True, tiny=(*_SMALL_ATTENTION, "model.context=32"),
           **_ATTENTION_SIZE),
    Family("bert", "seqbench.models.bert.BertModel", "C5", kind="attention", base="gpt",
           tiny=(*_SMALL_ATTENTION, "model.context=32", "model.tokenizer_vocab=300")),
    Family("t5", "seqbench.models.t5.T5Model", "C6", kind="attention",
           tiny=(*_SMALL_ATTENTION, "model.d_kv=16", "model.d_ff=64")),
    Family("vit", "seqbench.models.vit.ViTModel", "C7", kind="attention", tiny=_SMALL_ATTENTION),
    Family("cnn", "seqbench.models.cnn.ConvNetModel", "C8", tiny=("model.widths=[4,8]", "model.hidden=16")),
    Family("hmm", "seqbench.models.hmm.HMMModel", "C9", tiny=("model.states=8",)),
    # any layer from outside the package, by its import path (model.mixer=pkg.mod:Cls; seqbench.nn.mixer): the
    # parallel recurrences' backbone and recipes; its presets are solved when a run starts. Not compared: a
    # family of its own is a layer with an entry here (selector {"mixer": "<path>"}, extends="mixer")
    Family("mixer", "seqbench.models.mixer.MixerModel", "dimgray", base="mingru",
           tiny=("model.mixer=seqbench.nn.ssm:SelectiveSSM", "model.d_model=16", "+model.mixer_options.d_state=4"),
           **_PARALLEL_SIZE),
)}


def names() -> list[str]:
    """Every family, in table order."""
    return list(FAMILIES)


def compared() -> list[str]:
    """The language-model families the comparisons sweep, in table order."""
    return [f.name for f in FAMILIES.values() if f.compared]


def order(present) -> list[str]:
    """`present` names in table order; names the registry does not know (presets such as `lstm_fb1`)
    come last, sorted."""
    present = set(present)
    return [name for name in FAMILIES if name in present] + sorted(present - set(FAMILIES))


def colour(name: str, fallback: str | None = None) -> str | None:
    """A family's plot colour; a preset variant (`lstm_fb1`) has none of its own: `fallback` (None:
    matplotlib's next colour)."""
    return FAMILIES[name].colour if name in FAMILIES else fallback


def presets(folder: str, *variants: str) -> str:
    """The sweep list `<folder>/<family>,...` of the compared families, with the named variant presets
    (`lstm_fb1`) after the family they vary: the `${families:...}` resolver of the experiment files."""
    names = [n for name in compared() for n in (name, *sorted(v for v in variants if v.startswith(f"{name}_")))]
    unplaced = sorted(set(variants) - set(names))
    if unplaced:
        raise ValueError(f"variant presets {unplaced} name no compared family (variants are <family>_<what>)")
    return ",".join(f"{folder}/{name}" for name in names)


def family_of(thing) -> str:
    """The registry's family of whatever names a run: the one place a family is worked out.

    - a model config (`cfg.model`, a mapping with `_target_`): by its module and, among families sharing
      one, its selector keys (`cell`); a module the registry does not know gives its module's name
      (`seqbench.models.mine.MyModel` -> `mine`);
    - a name a preset or a record gives (`ptb/lstm`, `frontier/ptb/gpt`, `lstm_fb1`, `ptb/gpt:dropout=0`,
      `transformer_causal`): its last part before any `:`, and a variant `<family>_<what>` is its
      family's; a name of no family comes back as that part;
    - a run (`seqbench.training.record.Run`): its saved model config where it has one, else its name.
    """
    if isinstance(thing, str):
        base = thing.split("/")[-1].split(":")[0]
        return base if base in FAMILIES else next((f for f in FAMILIES if base.startswith(f"{f}_")), base)
    if hasattr(thing, "metrics") and hasattr(thing, "family"):  # a run read from its record
        model = (getattr(thing, "config", None) or {}).get("model")
        return family_of(model) if isinstance(model, Mapping) and model.get("_target_") else family_of(thing.family)
    target = thing.get("_target_")
    matches = [fam for fam in FAMILIES.values()
               if fam.module == target and all(str(_value(thing, k)) == v for k, v in fam.selector.items())]
    if matches:  # the most specific: a layer's own family before `mixer`, whose module it shares
        return max(matches, key=lambda fam: len(fam.selector)).name
    return str(target).rsplit(".", 2)[-2] if target and "." in str(target) else str(target)


def _value(model, key: str):
    """A model config's value, None where it is unset or still missing (`mixer: ???`)."""
    try:
        return model.get(key)
    except Exception:  # omegaconf's MissingMandatoryValue
        return None


def kind_of(thing) -> str | None:
    """'attention' or 'recurrent' for whatever `family_of` reads (the registry's `kind`); None for a
    name of no family, or a family of neither kind (the CNN, the HMM)."""
    family = FAMILIES.get(family_of(thing))
    return family.kind if family else None


@contextmanager
def registered(family: Family) -> Iterator[Family]:
    """Add `family` for the duration of a block (tests; a notebook trying an architecture)."""
    if family.name in FAMILIES:
        raise ValueError(f"a family named {family.name!r} is already registered")
    FAMILIES[family.name] = family
    try:
        yield family
    finally:
        del FAMILIES[family.name]
