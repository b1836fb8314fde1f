"""The house's rooms import only downward (`seqbench.rooms` holds the order, written once): every import of
`src/`, those written inside functions included, is checked against it with `ast`, the graph has no circle,
and the top level of the package keeps only what every room shares. scripts/import_graph.py counts the same
graph for the record (its numbers before and after issue 68 are in the issue's closing note)."""

from __future__ import annotations

import importlib.util
import re

from conftest import ROOT

from seqbench.rooms import ROOMS, room_of

SRC = ROOT / "src"
# Imports that climb against the order, each with the reason it is there; at most two may (issue 68). None does.
ALLOWED: dict[str, str] = {}
TOP_LEVEL_MOST = 12


def _graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


graph = _graph()


def test_no_import_climbs_against_the_rooms_order():
    # bugs caught: a run-time module importing the protocol or a report (the training path reaching up into
    # tuning to scale its rate, as it did three times); a callback importing an instrument; an instrument
    # importing a page writer; an import dodged into a function (it is an import all the same)
    climbing = graph.count(SRC)["climbing"]
    unexplained = [c for c in climbing if c.split(":")[0] + ":" + c.split(":")[1] not in ALLOWED]
    assert not unexplained, "\n".join(["imports that climb against seqbench.rooms:", *unexplained])
    assert len(ALLOWED) <= 2


def test_the_order_sees_a_climb_written_inside_a_function(tmp_path):
    # the check itself: a deferred import from the model side up into the reports is found, with its line
    package = tmp_path / "seqbench"
    (package / "models").mkdir(parents=True)
    (package / "reports").mkdir()
    for init in (package / "__init__.py", package / "models" / "__init__.py", package / "reports" / "__init__.py"):
        init.write_text("")
    (package / "reports" / "page.py").write_text("X = 1\n")
    (package / "models" / "model.py").write_text("def f():\n    from seqbench.reports.page import X\n    return X\n")
    climbing = graph.count(tmp_path)["climbing"]
    assert climbing == ["seqbench/models/model.py:2: seqbench.models.model (model side) imports seqbench.reports.page "
                        "(reports)"]


def test_there_is_no_import_circle():
    # bugs caught: the 15-module circle through the tuning protocol, the reports and the instruments, or
    # compose <-> entry <-> identity, back (../shared/tools/import_circles.py counts circles the same way)
    assert graph.count(SRC)["circles"] == []


def test_every_module_lives_in_a_room_and_the_top_level_keeps_what_every_room_shares():
    # bugs caught: a new module dropped at the top level (forty of them did); a package of no room, whose
    # imports no order checks
    modules = graph.modules(SRC)
    homeless = [m for m in modules if room_of(m) is None and m not in ("seqbench",)]
    assert not homeless, homeless
    top = [m for m, path in modules.items() if m.count(".") == 1 and m.startswith("seqbench.") and path.name != "__init__.py"]
    assert len(top) <= TOP_LEVEL_MOST, sorted(top)
    named = {prefix for _, prefixes in ROOMS for prefix in prefixes}
    assert {m for m in top} <= named, sorted(set(top) - named)  # each top-level module placed in the order by name


def test_a_runs_record_is_read_and_written_in_one_place():
    # bugs caught: a report or protocol step reading `metrics.json` (or `eval_metrics.json`) by hand again,
    # with its own idea of a torn file, of the family or of a resumed run's clock; a second `family_of`
    files = [p for p in (SRC / "seqbench").rglob("*.py")]
    by_hand = [str(p.relative_to(SRC)) for p in files if "metrics.json" in p.read_text(encoding="utf-8")
               and p.relative_to(SRC).as_posix() != "seqbench/training/record.py"]
    assert not by_hand, by_hand
    family_of = [str(p.relative_to(SRC)) for p in files if re.search(r"^def family_of\(", p.read_text(encoding="utf-8"), re.M)]
    assert family_of == ["seqbench/families.py"], family_of
