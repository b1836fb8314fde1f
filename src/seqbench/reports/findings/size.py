"""Claim 4: the families differ in size and in where their parameters sit.

This one needs no run: `seqbench.analysis.model_size` builds each compared family's default preset
(`conf/model/<family>.yaml`) on PTB's 10,000-word vocabulary and counts every parameter once, by the
module that holds it. The numbers are exact, so they link to the config they were counted from and
the confidence is that of a count.
"""

from __future__ import annotations

from pathlib import Path

from seqbench.analysis.model_size import COMPONENTS, _compose, _row
from seqbench.data.spec import TaskSpec
from seqbench.families import compared
from seqbench.reports.findings.claim import DOES_NOT_HOLD, HOLDS, Claim
from seqbench.reports.ledger import Number
from seqbench.tables import table_lines
from seqbench.training.run import instantiate

VOCAB = 10_000  # Penn Treebank's vocabulary: the corpus the default presets are sized for


def counts(families: list[str]) -> dict[str, dict]:
    """{family: the model-size row of its default preset}."""
    spec = TaskSpec(task="lm", vocab_size=VOCAB)
    out = {}
    for name in families:
        cfg = _compose([f"model={name}", "logger=csv"])
        out[name] = _row(f"model={name}", lambda cfg=cfg: instantiate(cfg.model, "model", spec=spec), "lm")
    return out


def claim(ledger) -> Claim:
    rows = counts(compared())
    inner = [c for c in COMPONENTS if c != "embeddings"]
    shown = [c for c in inner if any(r.get(c) for r in rows.values())]
    shares, where, table = {}, {}, []
    for name, r in rows.items():
        src = Path("conf/model") / f"{name}.yaml"
        n = lambda v, src=src: Number(v, src, f"{v:,}").md() if v else "–"  # noqa: E731
        shares[name] = Number(r["embeddings"] / r["total"], src, f"{r['embeddings'] / r['total']:.0%}")
        where[name] = max(inner, key=lambda c: r[c])
        table.append([name, n(r["total"]), f"{n(r['embeddings'])} ({shares[name].md()})", *(n(r[c]) for c in shown),
                      where[name]])
    answer = [f"Default presets (`model=<family>`) on a {VOCAB:,}-word vocabulary, parameters by where they sit:", "",
              *table_lines(["family", "total", "embeddings (share)", *shown, "largest part past the embeddings"], table,
                           align="lrr" + "r" * len(shown) + "l")]
    low, high = min(shares.values(), key=lambda s: s.value), max(shares.values(), key=lambda s: s.value)
    answer.append(f"\nThe embeddings are {low.md()} ({low.path.stem}) to {high.md()} ({high.path.stem}) of a default "
                  f"preset; past them, each family's parameters sit in the part the last column names.")
    totals = [r["total"] for r in rows.values()]
    differ = len(set(where.values())) > 1 and max(totals) > min(totals)
    return Claim(
        key="size", claim="The families differ in size and in where their parameters sit.",
        verdict=HOLDS if differ else DOES_NOT_HOLD, answer=answer,
        conditions=[f"Counted, not measured: each family's default preset built on a language-modelling spec with "
                    f"{VOCAB:,} tokens by `seqbench.analysis.model_size` at this commit; tied matrices counted once."],
        figures=[],
        confidence="Exact (a count of the configs as committed); it changes only when a preset does.",
        would_change="Another vocabulary (the embeddings' share falls with a smaller one) or other presets: "
                     "`python -m seqbench.analysis.model_size --vocab <n>` counts any of them.",
        number=low, number_label=f"embeddings' share of a default preset, lowest ({low.path.stem}; highest "
                                 f"{high.text}, {high.path.stem})")
