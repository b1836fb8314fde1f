"""Every entry of tests/mutations/planted.toml still plants its bug in the current code.

An entry's `find` text that no longer occurs exactly once in its file (the code around it was
refactored) plants nothing, and its test is no longer checked against the bug; a node id that names a
test that was renamed or removed runs nothing. scripts/check_mutations.py reports such an entry as
stale, but it runs each entry's tests (minutes) and is not part of CI, so it would be the only one to
notice. This reads the list and checks, without running any test: each edit's `find` (the entry's and
each `[[mutation.also]]`'s) occurs exactly once in its file, counted by check_mutations' own `plant` on
a copy of the files it edits; its `replace` differs from it; and each test id `path::name[params]`
names a file that defines `def name(`.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "mutations" / "planted.toml"


def _load_check_mutations():
    spec = importlib.util.spec_from_file_location("check_mutations", ROOT / "scripts" / "check_mutations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_mutations = _load_check_mutations()  # stdlib imports only; its main() runs under __main__ alone
MUTATIONS = tomllib.loads(PLANTED.read_text(encoding="utf-8"))["mutation"]


def _edits(mutation: dict) -> list[dict]:
    return [{"file": mutation["file"], "find": mutation["find"], "replace": mutation["replace"]},
            *({"file": mutation["file"], **also} for also in mutation.get("also", []))]


def test_the_names_are_unique():
    names = [m["name"] for m in MUTATIONS]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    """One folder for the copies `plant` edits (the checkout is left as it is): each test copies its files
    afresh over the last one's (a folder per test took 1.5 s to remove on an overlay file system)."""
    return tmp_path_factory.mktemp("planted")


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m["name"] for m in MUTATIONS])
def test_the_entry_plants_its_bug_and_names_tests_that_exist(mutation, copy):
    edits = _edits(mutation)
    for edit in edits:
        assert edit["replace"] != edit["find"], f"{edit['file']}: replace is find, nothing changes"
    for name in {edit["file"] for edit in edits}:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, copy / name)
    assert check_mutations.plant(copy, mutation) is None  # else "stale: ... occurs N times in ..."
    assert mutation["tests"], "no test named to catch it"
    for node in mutation["tests"]:
        match = re.fullmatch(r"([^:\[]+\.py)::(?:\w+::)*(\w+)(\[.*\])?", node)
        assert match, f"{node!r} is not a pytest node id path::name[params]"
        path, function = ROOT / match[1], match[2]
        assert path.is_file(), f"{node}: no file {match[1]}"
        assert f"def {function}(" in path.read_text(encoding="utf-8"), f"{node}: the file has no {function}"
