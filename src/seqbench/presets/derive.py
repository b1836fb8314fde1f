"""The comparisons' presets, derived from the registries: `python -m seqbench.presets`.

    python -m seqbench.presets             # every derived preset's widths, counts and targets (the solver's table)
    python -m seqbench.presets --write     # (re)generate conf/preset/<comparison>/<family>.yaml
    python -m seqbench.presets --check     # exit 1 when a file is not what --write would write

Why files and not Hydra's ConfigStore: a preset is read by more than Hydra. The sweep launcher starts
every job in a fresh process, `eval.py` and `--config-path <run>/.hydra` compose without importing
the registry first, `seqbench.protocol.final_cells` reads a frontier preset's `sizes` table from its file, and a
reader opens `conf/preset/ptb/lstm.yaml` to see what a run trained. A ConfigStore entry exists only in a
process that imported the registry before composing; a generated file is there for all of them, and
`--check` (tests/test_presets_current.py) keeps it equal to the registry.

For each comparison (`seqbench.presets.comparisons`) and each family that declares a width (`seqbench.families`)
and supports the comparison's task, the preset includes the recipe of how the family trains there
(`conf/comparison/<name>/<family or its base>.yaml`, or the base comparison's preset), chooses the
family's model, and sets the width the solver (`seqbench.presets.sizing`) found for each size: the anchor's
count at its width is the target. A pinned width (`seqbench.presets.comparisons.PINNED`) is written instead of
the solver's where runs were recorded at it; the comment says both. `model=mixer`, whose layer is
named only on the command line, gets the target itself (`sizing:`), solved when a run is composed.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from seqbench.presets.comparisons import Comparison, comparison, ordered, pin
from seqbench.families import FAMILIES, Family
from seqbench.presets.sizing import Solution, counter, solve

CONF = Path(__file__).resolve().parents[3] / "conf"
SIZING = "sizing"  # the node of a preset whose width a run solves when it starts (seqbench.presets.sizing.apply_sizing)


def families_of(c: Comparison) -> list[Family]:
    """The families with a preset in a comparison: those that declare a width and support its tasks."""
    return [f for f in FAMILIES.values() if f.width and all(t in f.tasks for t in c.tasks)]


def layer_unknown(model: DictConfig) -> bool:
    """The model config leaves a value to the command line (`model=mixer`'s `mixer: ???`): nothing can be built,
    so no width can be solved in advance; the preset carries its target and the run solves it when it starts."""
    return any(OmegaConf.is_missing(model, key) for key in model)


def recipe_of(c: Comparison, family: Family, conf_dir: Path = CONF) -> str | None:
    """`<comparison>/<family>` of the recipe file the family trains by in `c` (its own, else its base's)."""
    if c.base:
        return None
    seen, name = set(), family.name
    while name and name not in seen:
        if (conf_dir / "comparison" / c.name / f"{name}.yaml").is_file():
            return f"{c.name}/{name}"
        seen.add(name)
        name = FAMILIES[name].base if name in FAMILIES else None
    raise FileNotFoundError(f"conf/comparison/{c.name}/ has no recipe for {family.name} nor its bases: add "
                            f"conf/comparison/{c.name}/{family.name}.yaml or give the family a base.")


@dataclass
class Derived:
    """A family's preset in one comparison: each size's solution (pinned or solved) and the solver's own."""

    comparison: Comparison
    family: Family
    chosen: dict[str, Solution]      # size -> the width written (a pin, or the solver's)
    solved: dict[str, Solution]      # size -> the solver's width
    heads: int | None                # the head count in the table (attention)
    depths: dict[str, int]           # size -> layers, where the comparison sets them
    tied: bool                       # the decoder is tied: the tied keys follow the width
    warmup: bool                     # its recipe warms up: the frontier bounds the warmup's share
    step_decay: bool                 # its recipe decays per epoch (the classic RNNs on PTB)
    targets: dict[str, float]        # size -> the target count
    at_run: bool = False             # its layer is named on the command line: the width is solved when a run starts


class Deriver:
    """Derives the presets of one conf directory: composes each family's recipe in a comparison once to read its
    model and data, then counts at trial widths (`seqbench.presets.sizing`)."""

    def __init__(self, conf_dir: Path = CONF):
        self.conf_dir = conf_dir
        self._specs: dict[str, object] = {}
        self._models: dict[tuple[str, str], DictConfig] = {}
        self._targets: dict[tuple[str, str], float] = {}

    def compose(self, c: Comparison, family: str) -> DictConfig:
        """The family's config in `c` at any width: its recipe file (or the base comparison's preset) with its
        model, composed from the hand-written sources alone, never from the file being derived."""
        from seqbench.compose import compose_final

        key = (c.name, family)
        if key not in self._models:
            source = ([f"preset={c.base}/{family}"] if c.base else
                      [f"+comparison@_global_={recipe_of(c, FAMILIES[family], self.conf_dir)}", f"model={family}"])
            self._models[key] = compose_final([*c.context, *source, "logger=csv"], conf_dir=self.conf_dir)
        return self._models[key]

    def spec(self, c: Comparison, cfg: DictConfig):
        """The TaskSpec of the comparison's data, its DataModule set up once."""
        if c.name not in self._specs:
            from seqbench.presets.sizing import data_spec

            self._specs[c.name] = data_spec(cfg)
        return self._specs[c.name]

    def count(self, c: Comparison, family: Family, size: str, width: int) -> float:
        cfg = self.compose(c, family.name)
        return self._counter(c, family, size, cfg)(width)

    def _counter(self, c: Comparison, family: Family, size: str, cfg: DictConfig):
        depth = c.sizes[size].depth.get(family.kind) if family.kind else None
        tied = family.tied if cfg.model.get("tie_weights") else ()
        length = cfg.data.get("bptt") or cfg.model.get("context")
        return counter(cfg.model, self.spec(c, cfg), (*family.width, *tied), c.match, length,
                       (family.depth, depth) if depth is not None and family.depth else None)

    def target(self, c: Comparison, size: str) -> float:
        """The size's target: its number, or its anchor family's count at its width (counted once)."""
        s = c.sizes[size]
        if (c.name, size) not in self._targets:
            self._targets[c.name, size] = s.target if s.target is not None else self.count(c, FAMILIES[s.anchor],
                                                                                           size, s.width)
        return self._targets[c.name, size]

    def derive(self, c: Comparison, family: Family) -> Derived:
        cfg = self.compose(c, family.name)
        heads = int(cfg.model[family.heads]) if family.heads else None
        at_run = layer_unknown(cfg.model)
        chosen, solved, depths = {}, {}, {}
        for size, s in c.sizes.items():
            if family.kind in s.depth and family.depth:
                depths[size] = s.depth[family.kind]
            if at_run:
                continue
            count = self._counter(c, family, size, cfg)
            target = self.target(c, size)
            if s.anchor == family.name:
                solved[size] = Solution(s.width, count(s.width), target)
            else:
                solved[size] = solve(count, target, heads or 1)
            fixed = pin(c.name, family.name, size)
            chosen[size] = Solution(fixed.width, count(fixed.width), target) if fixed else solved[size]
        scheduler = cfg.model.get("scheduler") or {}
        return Derived(c, family, chosen, solved, heads, depths, bool(cfg.model.get("tie_weights")),
                       "warmup_steps" in scheduler, "start_epoch" in scheduler,
                       {size: self.target(c, size) for size in c.sizes}, at_run)


# -- the files ------------------------------------------------------------------------------------------

HEADER = ("# @package _global_\n"
          "# Generated by `python -m seqbench.presets --write` from seqbench.presets.comparisons and seqbench.families:\n"
          "# edit those (and the recipe named below), not this file; tests/test_presets_current.py checks it.\n")


def _comment(text: str) -> list[str]:
    """`text` as comment lines of at most 110 characters."""
    import textwrap

    return ["# " + line for line in textwrap.wrap(text, 108, break_on_hyphens=False)]


def _what(c: Comparison) -> str:
    return "parameters without embeddings" if c.match == "params" else "training FLOPs per token"


def _size_line(size: str, d: Derived, name_width: int) -> str:
    chosen, solved = d.chosen[size], d.solved[size]
    label = f"{size}: " if size else ""
    line = f"#   {label:<{name_width}}width {chosen.width:<5} {chosen.count:>12,.0f}  ({chosen.deviation:+.2%} of {chosen.target:,.0f})"
    fixed = pin(d.comparison.name, d.family.name, size)
    note = (f"pinned, the solver's width is {solved.width} ({solved.deviation:+.2%}): {fixed.reason}" if fixed else
            None if chosen.within else f"the nearest width: none is within {chosen.tolerance:.0%}")
    if note:
        line += "".join(f"\n#   {'':<{name_width}}  {part[2:]}" for part in _comment(note))
    return line


def _anchor_note(c: Comparison) -> str:
    """Where the targets come from: `the target: gpt at width 128`, or per size, grouped by anchor."""
    if len(c.sizes) == 1:
        s = next(iter(c.sizes.values()))
        return f"the target: {s.anchor} at width {s.width}" if s.anchor else f"the target: {s.target:,.0f}"
    groups: dict[str | None, list[str]] = {}
    for size, s in c.sizes.items():
        groups.setdefault(s.anchor, []).append(f"{s.width} ({size})" if s.anchor else f"{s.target:,.0f} ({size})")
    return "the targets: " + "; ".join(f"{anchor} at width {', '.join(parts)}" if anchor else ", ".join(parts)
                                       for anchor, parts in groups.items())


def render(d: Derived, conf_dir: Path = CONF) -> str:
    """The text of a derived preset file."""
    c, family = d.comparison, d.family
    lines = [HEADER.rstrip("\n"), *_comment(f"{c.about}.")]
    recipe = recipe_of(c, family, conf_dir)
    source = f"conf/comparison/{recipe}.yaml" if recipe else f"preset={c.base}/{family.name}"
    lines += _comment(f"{family.name}: trained as {source} says (the learning rate: its task's recipe).")
    at_run = d.at_run
    if at_run:
        lines += _comment(f"Its layer is named on the command line, so its width is solved when a run starts "
                          f"(seqbench.presets.sizing): {_what(c)}, {_anchor_note(c)}.")
    else:
        lines += _comment(f"{_what(c).capitalize()} ({_anchor_note(c)}):")
        name_width = max((len(s) + 2 for s in c.sizes if s), default=0)
        lines += [_size_line(size, d, name_width) for size in c.sizes]
    if d.step_decay and c.base:
        lines += _comment("Its recipe's LR decay is per epoch and most budgets end inside the first epoch, so these "
                          "runs train at the recipe's constant LR: experiments/frontier.md says so.")
    lines.append("defaults:")
    if recipe:
        lines += [f"  - /comparison@_global_: {recipe}", f"  - override /model: {family.name}"]
    else:
        lines.append(f"  - /preset@_global_: {c.base}/{family.name}")
    lines += ["  - _self_", ""]
    table = bool(next(iter(c.sizes)))
    keys = [*(family.tied if d.tied else ()), *family.width]
    if table:
        lines.append(f"size: {c.default_size}")
        lines.append("sizes:")
        for size in c.sizes:
            cells = []
            if size in d.depths:
                cells.append(f"layers: {d.depths[size]}")
            if d.heads:
                cells.append(f"heads: {d.heads}")
            cells.append(f"{c.match}: {d.targets[size]:.0f}" if at_run else f"{family.table}: {d.chosen[size].width}")
            lines.append(f"  {size}: {{{', '.join(cells)}}}")
    model = []
    if table:
        if d.depths:
            model.append(f"  {family.depth}: ${{sizes.${{size}}.layers}}")
        if d.heads:
            model.append(f"  {family.heads}: ${{sizes.${{size}}.heads}}")
        if not at_run:
            model += [f"  {key}: ${{sizes.${{size}}.{family.table}}}" for key in keys]
    elif not at_run:
        model += [f"  {key}: {d.chosen[''].width}" for key in keys]
    if c.warmup_fraction is not None and d.warmup:
        model += ["  scheduler:", f"    max_warmup_fraction: {c.warmup_fraction}   # the recipe's warmup steps, at "
                  f"most this part of a short budget's run"]
    if model:
        lines += ["model:", *model]
    if at_run:
        target = f"${{sizes.${{size}}.{c.match}}}" if table else f"{d.targets[''] :.0f}"
        lines += [f"{SIZING}:", f"  {c.match}: {target}"]
    return "\n".join(lines) + "\n"


def path_of(c: Comparison, family: Family, conf_dir: Path = CONF) -> Path:
    return conf_dir / "preset" / c.name / f"{family.name}.yaml"


MODEL_HEADER = ("# Generated by `python -m seqbench.presets --write` from seqbench.families: edit the family's\n"
                "# entry there, not this file; tests/test_presets_current.py checks it.\n")


def model_config(family: Family) -> str:
    """conf/model/<name>.yaml of a family that extends another model config: that config, its module (its own
    LightningModule, when its constructor takes the options of the one it extends) and its selector keys."""
    keys = "".join(f"{key}: {value}\n" for key, value in family.selector.items())
    says = ", ".join(f"{k}={v}" for k, v in family.selector.items())
    return (f"{MODEL_HEADER}# {family.name}: model={family.extends}{' with ' + says if says else ''} (seqbench.families).\n"
            f"defaults:\n  - {family.extends}\n  - _self_\n\n_target_: {family.module}\n{keys}")


def _write(path: Path, text: str) -> None:
    if not path.is_file() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def derive_all(conf_dir: Path = CONF, names: list[str] | None = None, only: list[str] | None = None,
               write: bool = False) -> list[tuple[Derived | None, Path, str]]:
    """(derived, file, text) for every derived file: the generated model configs (derived None) and the presets
    of the comparisons `names` for the families `only` (all, when not given); written when `write`. A
    comparison's base is derived before it (the frontier composes PTB's)."""
    out: list[tuple[Derived | None, Path, str]] = []
    for family in FAMILIES.values():
        if family.extends and (not only or family.name in only):
            out.append((None, conf_dir / "model" / f"{family.name}.yaml", model_config(family)))
            if write:
                _write(out[-1][1], out[-1][2])
    deriver = Deriver(conf_dir)
    for c in ordered():
        if names and c.name not in names:
            continue
        for family in families_of(c):
            if only and family.name not in only:
                continue
            d = deriver.derive(c, family)
            text = render(d, conf_dir)
            path = path_of(c, family, conf_dir)
            if write:
                _write(path, text)
            out.append((d, path, text))
    return out


def table(derived: list[Derived]) -> str:
    """The solver's table: every derived width with its count, the target and any pin."""
    rows = ["| comparison | family | size | width | count | target | off | solver's | pinned |", "|---|---|---|---|---|---|---|---|---|"]
    for d in derived:
        for size, chosen in d.chosen.items():
            fixed = pin(d.comparison.name, d.family.name, size)
            rows.append(f"| {d.comparison.name} | {d.family.name} | {size or '-'} | {chosen.width} | {chosen.count:,.0f} | "
                        f"{chosen.target:,.0f} | {chosen.deviation:+.2%} | {d.solved[size].width} | "
                        f"{'yes: ' + fixed.reason if fixed else ''} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    from seqbench.entry import register_resolvers

    parser = argparse.ArgumentParser(prog="python -m seqbench.presets", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="(re)generate the preset files")
    parser.add_argument("--check", action="store_true", help="exit 1 when a file differs from what --write writes")
    parser.add_argument("--comparison", action="append", help="only this comparison (repeatable)")
    parser.add_argument("--family", action="append", help="only this family (repeatable)")
    parser.add_argument("--conf", type=Path, default=CONF)
    args = parser.parse_args(argv)
    register_resolvers()
    for name in args.comparison or []:
        comparison(name)  # an unknown name fails here, in one sentence
    results = derive_all(args.conf, args.comparison, args.family, write=args.write)
    print(table([d for d, _, _ in results if d is not None]))
    stale = [path for _, path, text in results if not path.is_file() or path.read_text() != text]
    if args.check and stale:
        print("stale (run python -m seqbench.presets --write): " + ", ".join(str(p) for p in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
