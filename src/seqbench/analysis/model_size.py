"""Where the parameters of each model preset sit: embeddings, recurrence, attention, FFN, norms, output.

    python -m seqbench.analysis.model_size                    # every conf/model preset on a 10k vocabulary
    python -m seqbench.analysis.model_size --vocab 65         # ... on a character vocabulary
    python -m seqbench.analysis.model_size --families ptb     # the conf/preset/ptb presets on their own data
    python -m seqbench.analysis.model_size --models --families probe   # no conf/model preset, the probes only

The model-size claim ("attention needs more parameters" / "an RNN's size does not grow with the
context") is a table, not a sentence. Each parameter is counted once (tied matrices under the
module that owns them first, the embedding) and assigned to a component by the module holding it:

    embeddings   nn.Embedding token tables; the Linear that maps feature vectors in (no vocabulary)
    positions    learned position tables (sinusoidal ones have no parameters)
    recurrent    nn.RNN / nn.LSTM / nn.GRU, the reference cells, the minGRU / minLSTM / selective SSM layers
    attention    multi-head attention: Q, K, V and output projections
    ffn          the position-wise feed-forward networks
    norms        LayerNorm gains and biases
    output       everything else: the LM or task head (0 when tied to the embedding)

Model presets are built on a language-modelling spec with `--vocab` tokens (default 10,000, Penn
Treebank's); family presets (conf/preset/<group>/) on the spec of the data they compose (the probe
presets on copy memory at T = 100, as `experiment=long_range` composes them), so the table shows
what a run of that preset logs as `params`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from omegaconf.errors import OmegaConfBaseException
from torch import nn

from seqbench.analysis.gradient_flow import _compose as compose
from seqbench.data.spec import TaskSpec
from seqbench.entry import PROJECT_ROOT
from seqbench.errors import UserError
from seqbench.nn.attention import MultiHeadAttention
from seqbench.nn.cells import ReferenceRNN
from seqbench.nn.min_rnn import MinGRU, MinLSTM
from seqbench.nn.positions import LearnedPositions
from seqbench.nn.ssm import SelectiveSSM
from seqbench.nn.transformer import FeedForward
from seqbench.provenance import write_record
from seqbench.tables import table_lines
from seqbench.training.run import instantiate

# family groups whose presets leave the data to their experiment: the data that experiment uses
GROUP_DATA = {"probe": ["data=copy"], "pretraining": ["data=sst2"]}  # groups whose presets pick no data
COMPONENTS = ("embeddings", "positions", "recurrent", "attention", "ffn", "norms", "output")


def _component(path: str, owner: nn.Module, parents: list[nn.Module]) -> str:
    if any(isinstance(p, LearnedPositions) for p in parents):
        return "positions"
    if isinstance(owner, nn.Embedding):
        return "embeddings"
    if isinstance(owner, (nn.RNNBase, ReferenceRNN)) or any(isinstance(p, (MinGRU, MinLSTM, SelectiveSSM)) for p in parents):
        return "recurrent"  # the parallel recurrences' layers (gates, scan, the SSM's conv) are their recurrence
    if any(isinstance(p, MultiHeadAttention) for p in parents):
        return "attention"
    if any(isinstance(p, FeedForward) for p in parents):
        return "ffn"
    if isinstance(owner, nn.LayerNorm):
        return "norms"
    if isinstance(owner, nn.Linear) and path.rsplit(".", 2)[-2] in ("embedding", "tok_emb", "embed"):
        return "embeddings"  # the input map of a feature-vector model stands where the table would
    return "output"


def components(model: nn.Module) -> dict[str, int]:
    """{component: trainable parameters}, every parameter counted once; sums to model.num_params()."""
    modules = dict(model.named_modules())
    counts = dict.fromkeys(COMPONENTS, 0)
    for name, p in model.named_parameters():  # shared (tied) tensors appear once, under their first owner
        if not p.requires_grad:
            continue
        parts = name.split(".")[:-1]
        parents = [modules[".".join(parts[:i])] for i in range(len(parts) + 1)]  # root .. owner
        counts[_component(name, parents[-1], parents)] += p.numel()
    return counts


def tied(model: nn.Module) -> bool:
    """Whether an output layer shares its weight with an input embedding."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    return any(isinstance(m, nn.Linear) and id(m.weight) in embeddings for m in model.modules())


# -- presets ------------------------------------------------------------------------------------
def _compose(overrides: list[str]):
    return compose(overrides)


def preset_rows(conf: Path, vocab: int, family_groups: list[str], models: list[str] | None = None) -> list[dict]:
    """One row per preset: conf/model/*.yaml on an LM spec (those named in `models`; None: all), then
    conf/preset/<group>/*.yaml."""
    rows = []
    lm_spec = TaskSpec(task="lm", vocab_size=vocab)
    names = models if models is not None else [p.stem for p in sorted((conf / "model").glob("*.yaml"))]
    for name in names:
        if not (conf / "model" / f"{name}.yaml").is_file():
            raise UserError(f"--models {name}: there is no conf/model/{name}.yaml.")
        cfg = _compose([f"model={name}", "logger=csv"])
        rows.append(_row(f"model={name}", lambda cfg=cfg: instantiate(cfg.model, "model", spec=lm_spec),
                         f"lm, vocab {vocab:,}"))
    specs: dict[str, TaskSpec] = {}
    for group in family_groups:
        for path in sorted((conf / "preset" / group).glob("*.yaml")):
            cfg = _compose([f"preset={group}/{path.stem}", "logger=csv", *GROUP_DATA.get(group, [])])
            key = str(cfg.data)
            try:
                if key not in specs:
                    datamodule = instantiate(cfg.data, "data")
                    datamodule.prepare_data()
                    datamodule.setup("fit")
                    specs[key] = datamodule.spec
            except (UserError, OSError) as exc:
                rows.append({"preset": f"preset={group}/{path.stem}", "data": "-", "error": str(exc)})
                continue
            spec = specs[key]
            data = f"{spec.task}, vocab {spec.vocab_size:,}" if spec.vocab_size else f"{spec.task}, {spec.input_dim} features"
            rows.append(_row(f"preset={group}/{path.stem}",
                             lambda cfg=cfg, spec=spec: instantiate(cfg.model, "model", spec=spec), data))
    return rows


def _row(preset: str, build, data: str) -> dict:
    try:
        model = build()
    except UserError as exc:  # a family that does not pose an LM (an image model, ...)
        return {"preset": preset, "data": data, "error": str(exc)}
    except OmegaConfBaseException as exc:  # e.g. family/pretraining/*: ${pretrained.*} comes from an experiment
        return {"preset": preset, "data": data, "error": f"needs a value only an experiment sets: {exc}".split("\n")[0]}
    counts = components(model)
    return {"preset": preset, "data": data, **counts, "total": model.num_params(), "tied": tied(model)}


def markdown(rows: list[dict]) -> str:
    ok = [r for r in rows if "error" not in r]
    shown = [c for c in COMPONENTS if any(r[c] for r in ok)]
    lines = table_lines(["preset", "data", *shown, "total", "tied"],
                        ([r["preset"], r["data"], *(f"{r[c]:,}" for c in shown), f"{r['total']:,}", "yes" if r["tied"] else "no"]
                         for r in ok), align="ll" + "r" * (len(shown) + 1) + "l")
    skipped = [r for r in rows if "error" in r]
    if skipped:
        lines += [""] + [f"- {r['preset']}: not built ({r['error']})" for r in skipped]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m seqbench.analysis.model_size", description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", type=int, default=10_000, help="vocabulary of the LM spec for conf/model presets")
    parser.add_argument("--families", nargs="*", default=None,
                        help="conf/preset groups to include (default: all; give none to leave them out)")
    parser.add_argument("--models", nargs="*", default=None,
                        help="conf/model presets to include (default: all; give none to leave them out)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the table to this file with its ledger record (record.json beside it)")
    args = parser.parse_args(argv)
    started = time.time()
    conf = PROJECT_ROOT / "conf"
    groups = args.families if args.families is not None else sorted(p.name for p in (conf / "preset").iterdir() if p.is_dir())
    text = markdown(preset_rows(conf, args.vocab, groups, args.models))
    if args.out is None:
        print(text)
        return text

    args.out.write_text(text + "\n")
    write_record(args.out.parent, [args.out.name], "python -m seqbench.analysis.model_size " + " ".join(argv or []),
                 started, page="experiments/model-size.md")
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
