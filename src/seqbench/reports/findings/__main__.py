"""`python -m seqbench.reports.findings [--check]`: write experiments/findings.md and the README's summary
block from the ledger; with --check, write nothing and exit 1 if either differs from what is committed
(what the test runs, and what a reviewer runs after adding a record)."""

from __future__ import annotations

import argparse
import sys

from seqbench.entry import PROJECT_ROOT
from seqbench.reports.findings import gradients, headline, long_range, size, speed
from seqbench.reports.findings.claim import Claim
from seqbench.reports.findings.page import PAGE, README, page, replace_block, summary_block
from seqbench.reports.ledger import Ledger


def claims(ledger) -> list[Claim]:
    """Every claim, in the order the page gives them."""
    return [module.claim(ledger) for module in (speed, long_range, gradients, size, headline)]


def render(root=PROJECT_ROOT) -> dict:
    """{path: the text the generator writes there}, from the ledger under `root`."""
    ledger = Ledger(root)
    found = claims(ledger)
    return {root / PAGE: page(found, ledger),
            root / README: replace_block((root / README).read_text(), summary_block(found))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seqbench.reports.findings", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed files differ; write nothing")
    args = parser.parse_args(argv)
    stale = []
    for path, text in render().items():
        if not path.is_file() or path.read_text() != text:
            stale.append(path)
            if not args.check:
                path.write_text(text)
    verb = "differ from the ledger (run python -m seqbench.reports.findings)" if args.check else "written"
    print("\n".join(f"{p.relative_to(PROJECT_ROOT)}: {verb}" for p in stale) or "up to date")
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
