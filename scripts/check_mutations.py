"""Check that the tests catch the bugs they are written against: plant each bug of
`tests/mutations/planted.toml` in a temporary copy of the checkout, run the tests named for it, and
report whether one of them failed (caught) or all passed (missed).

    .venv/bin/python scripts/check_mutations.py                # every planted bug
    .venv/bin/python scripts/check_mutations.py -k nt_asgd     # those whose name contains nt_asgd

Each entry names a file, an exact `find` text (it must occur exactly once, so an entry whose code has
moved on is reported as stale instead of silently planting nothing), its `replace`ment, optional
further edits (`[[mutation.also]]`, same keys), and the pytest node ids that must fail. Before the
bugs, the named tests run once on the unchanged copy: a test that fails there catches nothing.

Optional and not part of CI: it runs the named tests once per bug (a few minutes in all on 2 cores).
Exit status 1 when a bug is missed, an entry is stale or the unchanged code fails its tests.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "mutations" / "planted.toml"


def copy_checkout(target: Path) -> None:
    """The files git would commit (tracked, and untracked but not ignored), without .venv or outputs."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def plant(copy: Path, mutation: dict) -> str | None:
    """Apply the mutation's edits to the copy; the reason it cannot be planted, or None."""
    edits = [{"file": mutation["file"], "find": mutation["find"], "replace": mutation["replace"]},
             *mutation.get("also", [])]
    for edit in edits:
        path = copy / edit.get("file", mutation["file"])
        text = path.read_text(encoding="utf-8")
        found = text.count(edit["find"])
        if found != 1:
            return f"stale: {edit['find'].strip()[:60]!r} occurs {found} times in {path.relative_to(copy)}"
        path.write_text(text.replace(edit["find"], edit["replace"]), encoding="utf-8")
    return None


def run_tests(copy: Path, tests: list[str]) -> tuple[int, list[tuple[str, str]], str]:
    """pytest on the copy: (exit status, [(failed test, its one-line message)], pytest's last line)."""
    data_dir = os.environ.get("SEQBENCH_DATA_DIR", str(ROOT.parent / "shared" / "data"))  # the copy has no sibling
    env = {**os.environ, "PYTHONPATH": str(copy / "src"), "SEQBENCH_DATA_DIR": data_dir, "OMP_NUM_THREADS": "1",
           "COLUMNS": "400"}  # wide enough that pytest does not cut the failure messages
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rf", "--tb=short", "-p", "no:cacheprovider",
                           *tests], cwd=copy, env=env, capture_output=True, text=True)
    failed = re.findall(r"^FAILED (\S+)(?: - (.*))?$", proc.stdout, flags=re.MULTILINE)
    last = (proc.stdout.strip().splitlines() or proc.stderr.strip().splitlines() or [""])[-1]
    return proc.returncode, [(test, message or "") for test, message in failed], last


def check(mutation: dict, workdir: Path) -> tuple[str, list[tuple[str, str]]]:
    """(caught / missed / stale: ... / error: ..., the failed tests with their messages)."""
    copy = workdir / mutation["name"]
    copy_checkout(copy)
    try:
        stale = plant(copy, mutation)
        if stale:
            return stale, []
        status, failed, last = run_tests(copy, mutation["tests"])
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    if status == 1 and failed:
        return "caught", failed
    return ("missed", []) if status == 0 else (f"error (pytest exit {status}: {last})", [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", dest="only", default="", help="only the mutations whose name contains this")
    parser.add_argument("--no-baseline", action="store_true", help="skip running the tests on the unchanged copy")
    parser.add_argument("--list", type=Path, default=PLANTED, help="the TOML list of planted bugs")
    args = parser.parse_args(argv)
    mutations = [m for m in tomllib.loads(args.list.read_text())["mutation"] if args.only in m["name"]]
    if not mutations:
        raise SystemExit(f"no mutation in {args.list} has {args.only!r} in its name")
    ok = True
    with tempfile.TemporaryDirectory(prefix="seqbench-mutations-") as tmp:
        workdir = Path(tmp)
        if not args.no_baseline:
            clean = workdir / "unchanged"
            copy_checkout(clean)
            tests = sorted({t for m in mutations for t in m["tests"]})
            status, failed, last = run_tests(clean, tests)
            print(f"unchanged code: {'passes' if status == 0 else f'FAILS (pytest exit {status})'} "
                  f"({len(tests)} tests: {last})", flush=True)
            for test, message in failed:
                print(f"  {test}: {message}")
            ok = status == 0
        print("| planted bug | file | verdict | failing test: message |\n|---|---|---|---|")
        for mutation in mutations:
            verdict, failed = check(mutation, workdir)
            ok &= verdict == "caught"
            first = "; ".join(f"`{test}`: {message}".replace("|", "\\|") for test, message in failed[:2])
            print(f"| {mutation['name']}: {mutation['bug']} | `{mutation['file']}` | {verdict} | {first} |", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
