"""The import graph of `src/`, counted: modules, imports between them (those written inside functions
too), the imports that climb against the rooms' order (`seqbench.rooms`), circles and layers.

    python3 scripts/import_graph.py                 # this checkout's src/
    python3 scripts/import_graph.py <other>/src     # another tree (an older commit: `git worktree add`)
    python3 scripts/import_graph.py -v              # and list the climbing imports and the circles

A module of an older tree that has since moved is placed in the room its new home is in (`MOVED`), so
the counts before and after a move are taken against the same order. Circles are counted as
../shared/tools/import_circles.py counts them (an import of a package's `__init__` is not an edge
there); every other count includes those imports. Only the standard library: no package is imported.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE / "src"))
from seqbench.rooms import ROOMS, room_of  # noqa: E402 - the order, written once; stdlib only

# where the modules of ce20a72 went in issue 68 (old dotted name -> new); a prefix maps everything under it
MOVED = {
    "seqbench.budget": "seqbench.training.budget", "seqbench.clocks": "seqbench.training.clocks",
    "seqbench.config_check": "seqbench.training.config_check", "seqbench.console": "seqbench.training.console",
    "seqbench.convert_checkpoint": "seqbench.training.convert_checkpoint",
    "seqbench.csv_logger": "seqbench.training.csv_logger", "seqbench.dashboard": "seqbench.training.dashboard",
    "seqbench.evaluate": "seqbench.training.evaluate", "seqbench.hydra_callbacks": "seqbench.training.hydra_callbacks",
    "seqbench.lightning_warnings": "seqbench.training.lightning_warnings", "seqbench.loggers": "seqbench.training.loggers",
    "seqbench.run": "seqbench.training.run", "seqbench.saved_yaml": "seqbench.training.saved_yaml",
    "seqbench.preset_choice": "seqbench.identity", "seqbench.bench": "seqbench.analysis.bench",
    "seqbench.tuning": "seqbench.protocol.tuning", "seqbench.chain": "seqbench.protocol.chain",
    "seqbench.campaign": "seqbench.protocol.campaign", "seqbench.final_cells": "seqbench.protocol.final_cells",
    "seqbench.transfer": "seqbench.protocol.transfer", "seqbench.verdict": "seqbench.protocol.verdict",
    "seqbench.sweep_archive": "seqbench.protocol.sweep_archive", "seqbench.sweep_reads": "seqbench.protocol.sweep_reads",
    "seqbench.analysis.campaign_cost": "seqbench.protocol.campaign_cost",
    "seqbench.analysis.tuning_extension": "seqbench.protocol.tuning_extension",
    "seqbench.analysis.tuning_search": "seqbench.protocol.tuning_search",
    "seqbench.analysis.tuning_trials": "seqbench.protocol.tuning_trials",
    "seqbench.analysis.tuning_report": "seqbench.protocol.tuning_report",
    "seqbench.analysis.tuning_heatmap": "seqbench.protocol.tuning_heatmap",
    "seqbench.report": "seqbench.reports.report", "seqbench.report_plots": "seqbench.reports.report_plots",
    "seqbench.frontier": "seqbench.reports.frontier", "seqbench.frontier_tuned": "seqbench.reports.frontier_tuned",
    "seqbench.frontier_untuned": "seqbench.reports.frontier_untuned",
    "seqbench.tuning_effect": "seqbench.reports.tuning_effect", "seqbench.pages": "seqbench.reports.pages",
    "seqbench.ledger": "seqbench.reports.ledger", "seqbench.findings": "seqbench.reports.findings",
    "seqbench.analysis.frontier_join": "seqbench.reports.frontier_join",
    "seqbench.analysis.layer_bench_page": "seqbench.reports.layer_bench_page",
    "seqbench.analysis.translation_jobs": "seqbench.reports.translation_jobs",
    "seqbench.analysis.translation_table": "seqbench.reports.translation_table",
    "seqbench.analysis.translation_verdict": "seqbench.reports.translation_verdict",
    "seqbench.analysis.finetune_report": "seqbench.reports.finetune_report",
    "seqbench.analysis.long_range_report": "seqbench.reports.long_range_report",
    "seqbench.analysis.loss_text": "seqbench.tables",
}


def home(module: str) -> str:
    """`module`'s name after the moves (itself where it did not move)."""
    for old in sorted(MOVED, key=len, reverse=True):
        if module == old or module.startswith(old + "."):
            return MOVED[old] + module[len(old):]
    return module


def modules(src: Path) -> dict[str, Path]:
    """Dotted name -> file, for every package directly under `src` (a package's `__init__` by its name)."""
    out = {}
    for package in sorted(p.parent for p in src.glob("*/__init__.py")):
        for path in sorted(package.rglob("*.py")):
            name = ".".join(path.relative_to(src).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(imported module of `known`, line, written inside a function) for each import in the file; imports
    under `if TYPE_CHECKING:` are annotations, not uses, and are left out."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip, inside = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(id(n) for n in ast.walk(node) if n is not node)

    def target(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    out = []
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names]
        for dotted in names:
            found = target(dotted)
            if found and found != name and not name.startswith(found + ".") and "." in found:
                out.append((found, node.lineno, id(node) in inside))
    return out


def circles(edges: dict[str, set[str]], known: dict[str, Path]) -> list[list[str]]:
    """Strongly connected components of more than one module, as import_circles.py finds them."""
    graph = {m: {t for t in ts if known[t].name != "__init__.py"} for m, ts in edges.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def layers(edges: dict[str, set[str]], comps: list[list[str]]) -> int:
    """The longest chain of imports, a circle counted as one node: how many layers the graph stacks."""
    rep = {m: c[0] for c in comps for m in c}
    dag: dict[str, set[str]] = {}
    for m, ts in edges.items():
        dag.setdefault(rep.get(m, m), set()).update(rep.get(t, t) for t in ts if rep.get(t, t) != rep.get(m, m))
    depth: dict[str, int] = {}

    def d(v: str) -> int:
        if v not in depth:
            depth[v] = 0
            depth[v] = 1 + max((d(w) for w in dag.get(v, ())), default=0)
        return depth[v]

    return max((d(v) for v in dag), default=0)


def count(src: Path) -> dict:
    known = modules(src)
    edges: dict[str, set[str]] = {m: set() for m in known}
    deferred, climbing = set(), []
    for name, path in known.items():
        for found, line, inside in imports(name, path, known):
            edges[name].add(found)
            if inside:
                deferred.add((name, line))
            mine, theirs = room_of(home(name)), room_of(home(found))
            if mine is not None and theirs is not None and theirs > mine:
                climbing.append(f"{path.relative_to(src)}:{line}: {name} ({ROOMS[mine][0]}) imports "
                                f"{found} ({ROOMS[theirs][0]})")
    comps = circles(edges, known)
    top = [m for m in known if m.count(".") == 1 and m.startswith("seqbench.") and known[m].name != "__init__.py"]
    return {"modules": len(known), "top level of seqbench": len(top),
            "imports": sum(len(t) for t in edges.values()), "written inside functions": len(deferred),
            "climbing": sorted(set(climbing)), "circles": comps, "layers": layers(edges, comps)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("src", nargs="?", type=Path, default=HERE / "src")
    parser.add_argument("-v", "--verbose", action="store_true", help="list the climbing imports and the circles")
    args = parser.parse_args(argv)
    counts = count(args.src)
    biggest = max((len(c) for c in counts["circles"]), default=0)
    print(f"{counts['modules']} modules ({counts['top level of seqbench']} at the top level of seqbench), "
          f"{counts['layers']} layers; {counts['imports']} imports between them "
          f"({counts['written inside functions']} import statements written inside functions), {len(counts['climbing'])} climbing "
          f"against the rooms' order, {len(counts['circles'])} circles (the longest {biggest} modules)")
    if args.verbose:
        print("\n".join(["", "climbing:", *counts["climbing"], "", "circles:",
                         *(", ".join(c) for c in counts["circles"])]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
