"""The protocol's grid-edge rule as sweeps to run, read from the search, not typed
(experiments/tuning-protocol.md).

A best setting on the edge of its grid says the optimum may lie beyond it. The rule: where any
family's best lies on an edge, the grid is extended one step beyond that edge **for every family of
the corpus**, so that every family keeps the same search. One step is the grid's own ratio (the
rates and the token counts are geometric: x2 here), and the new points are the rectangle's rim:

- the new token counts with every rate, old and new (the `_edge_tokens` sweep);
- the new rates with the old token counts (the `_edge_lr` sweep).

Together with the base grid that is the full product of the extended axes, each point once; a
separate sweep directory keeps the base sweep's job numbers as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from seqbench.protocol.tuning_search import Search
from seqbench.protocol.tuning_trials import planned

LOWER = {"lowest lr": ("lr", 0), "fewest tokens": ("tokens", 0)}
UPPER = {"highest lr": ("lr", -1), "most tokens": ("tokens", -1)}


def beyond(axis: list[float], end: int) -> float:
    """One geometric step past the axis's first (`end=0`) or last (`end=-1`) value."""
    if end == 0:
        return axis[0] * axis[0] / axis[1]
    return axis[-1] * axis[-1] / axis[-2]


@dataclass(frozen=True)
class Extension:
    corpus: str
    lrs: list[float]        # the base grid's rates (every family of the corpus searched the same)
    tokens: list[int]
    new_lrs: list[float]
    new_tokens: list[int]
    reasons: dict[str, list[str]]  # family -> the edges its best lies on

    def sweeps(self, experiment: str) -> list[tuple[str, str]]:
        """(sweep name, overrides) for the extension: the new token counts with every rate, then the
        new rates with the old token counts."""
        out = []
        if self.new_tokens:
            out.append((f"{experiment}_edge_tokens", f"experiment={experiment} tune.lr_scale={_join(self.lrs + self.new_lrs)} "
                                                     f"tune.tokens_per_step={_join(self.new_tokens)}"))
        if self.new_lrs:  # a search over the rate alone (the probes') keeps its experiment's tokens per step
            tokens = f" tune.tokens_per_step={_join(self.tokens)}" if self.tokens else ""
            out.append((f"{experiment}_edge_lr",
                        f"experiment={experiment} tune.lr_scale={_join(self.new_lrs)}{tokens}"))
        return out


def _join(values) -> str:
    return ",".join(f"{v:g}" for v in sorted(values))


def extensions(found: list[Search]) -> list[Extension]:
    """Per corpus where some family's best lies on an edge of the merged grid: the values one step
    beyond each such edge of the corpus's grid (the union of its families' axes)."""
    out = []
    for corpus in dict.fromkeys(s.corpus for s in found):
        # a search over the rate alone (the probes': no tokens axis) has the rate's two edges
        mine = [s for s in found if s.corpus == corpus and s.lr_axis]
        if not mine:
            continue
        # the corpus's grid: every family's planned points (a family part-way through a sweep without a
        # multirun.yaml knows only the points it reached)
        lrs = sorted({v for s in mine for v in s.lr_axis})
        tokens = sorted({v for s in mine for v in s.tokens_axis})
        reasons = {s.family: s.edges() for s in mine if s.edges()}
        hit = {edge for edges in reasons.values() for edge in edges}
        new = {"lr": set(), "tokens": set()}
        for edge, (axis, end) in {**LOWER, **UPPER}.items():
            values = lrs if axis == "lr" else tokens
            if edge in hit and len(values) > 1:
                new[axis].add(beyond(values, end))
        if new["lr"] or new["tokens"]:
            out.append(Extension(corpus, lrs, tokens, sorted(new["lr"]), sorted(int(round(t)) for t in new["tokens"]),
                                 reasons))
    return out


def experiments(sweeps) -> dict[str, str]:
    """corpus -> the experiment its search ran (`experiment=` of the sweep's command line, in its
    `multirun.yaml`), so the printed sweeps repeat the search's own protocol."""
    from omegaconf import OmegaConf


    out: dict[str, str] = {}
    for sweep in sweeps:
        path = Path(sweep) / "multirun.yaml"
        if not path.is_file():
            continue
        task = OmegaConf.select(OmegaConf.load(path), "hydra.overrides.task") or []
        names = [o.split("=", 1)[1] for o in task if o.split("=", 1)[0].lstrip("+") == "experiment"]
        for corpus, _family in (planned(sweep) or {}):
            if names:
                out.setdefault(corpus, names[0])
    return out


def commands(found: list[Search], sweeps) -> list[str]:
    """The extension's commands (scripts/sweep_background.sh), one comment line per corpus saying why;
    empty where no best lies on an edge."""
    names = experiments(sweeps)
    lines = []
    for ext in extensions(found):
        running = [s.family for s in found if s.corpus == ext.corpus and not s.complete]
        why = "; ".join(f"{family}: {', '.join(edges)}" for family, edges in ext.reasons.items())
        lines.append(f"# {ext.corpus}: best on the grid's edge ({why})"
                     + (f"; provisional, still searching: {', '.join(running)}" if running else ""))
        experiment = names.get(ext.corpus)
        if experiment is None:
            lines.append(f"# {ext.corpus}: no multirun.yaml names the search's experiment; new lr x "
                         f"{_join(ext.new_lrs) or '-'}, tokens per step {_join(ext.new_tokens) or '-'}")
            continue
        ran = {Path(sweep).name for sweep in sweeps}
        for name, overrides in ext.sweeps(experiment):
            # the protocol extends once; and the same sweep name with another grid would have the resumable
            # launcher skip the new grid's jobs as completed (their numbers are the first extension's)
            lines.append(f"# {name} has run: the protocol extends once, so this edge is reported, not chased"
                         if name in ran else f"bash scripts/sweep_background.sh {name} {overrides}")
    return lines
