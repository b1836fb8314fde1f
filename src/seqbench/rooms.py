"""The rooms of the house and the order they import in, written once.

A reader who adds a report or a protocol step should know which room it goes in and what it may
import; a room imports only from the rooms below it (and from itself), so nothing after training
reaches back into it sideways and no circle can form across rooms:

    foundation   errors, provenance, the table writer, checkpoints, the LR schedules, this map
    nn           pure torch building blocks
    registry     the families (each reads its FLOPs formula from nn)
    model side   models, tasks, data, metrics, callbacks: what a LightningModule and its data need
    composition  compose, entry, identity: from the command line to the config a run uses
    run          seqbench.training: a job at run time, the writer and the one reader of its record
    instruments  seqbench.analysis: tools that load a checkpoint or time a model; they may read a run
                 but write no page
    protocol     seqbench.protocol: the equal-tuning chain, transfer, final cells, campaign, verdict rules
    reports      seqbench.reports: pages, findings, frontier and translation tables, the ledger, plots

`tests/test_import_order.py` checks every import of `src/` against this order (imports inside functions
included) and `scripts/import_graph.py` counts the graph with it. Only the standard library: both read it
without importing torch.
"""

from __future__ import annotations

ROOMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("seqbench.errors", "seqbench.provenance", "seqbench.tables", "seqbench.checkpoints",
                    "seqbench.optim", "seqbench.rooms")),
    ("nn", ("seqbench.nn",)),
    ("registry", ("seqbench.families",)),
    ("model side", ("seqbench.models", "seqbench.tasks", "seqbench.data", "seqbench.metrics", "seqbench.callbacks")),
    ("composition", ("seqbench.entry", "seqbench.identity", "seqbench.compose")),
    ("run", ("seqbench.training",)),
    ("instruments", ("seqbench.analysis",)),
    ("protocol", ("seqbench.protocol",)),
    ("reports", ("seqbench.reports",)),
    # outside the package: Hydra finds launchers only under hydra_plugins; a launcher keeps the protocol's archive
    ("launchers", ("hydra_plugins",)),
)


def room_of(module: str) -> int | None:
    """The index in ROOMS of the room `module` (a dotted name) lives in; None for a module of no room
    (the package's own `__init__`, a third-party module)."""
    best, index = "", None
    for i, (_, prefixes) in enumerate(ROOMS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best, index = prefix, i
    return index
