"""The transfer check's record: for each family and tier, whether the tuned setting held or moved, to
what, and by how much selection loss (`seqbench.protocol.transfer_check` holds the rule).

    python -m seqbench.protocol.transfer tune_frontier_ptb [--root outputs/sweeps] [--report experiments/figures/transfer-ptb]

prints the table (and with `--report` writes it as `transfer.md` beside its ledger record), read from the
chain's sweeps under `--root`: the search and its extension for the tuned settings, the
`<experiment>_transfer_*` sweeps for the checks.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from seqbench.families import order
from seqbench.protocol.chain import Chain
from seqbench.protocol.transfer_check import MARGIN, Check, Setting
from seqbench.provenance import command_line, utc_now, write_record
from seqbench.tables import table


def _text(s: Setting) -> str:
    tokens = s.get("tokens_per_step")
    return f"lr x {float(s.get('lr_scale') or 1):g}, " + (f"{tokens} tokens" if tokens else "the recipe's batch")


def markdown(found: dict[tuple[str, float], Check]) -> str:
    """One row per (family, tier) checked: the tuned setting, its loss there, the chosen one and the gain."""
    head = ["family", "tier (FLOPs)", "tuned setting", "its selection loss here", "best checked setting",
            "its selection loss", "held, or moved by (nats)", "trials finished"]
    rows = []
    for family in order({f for f, _ in found}):
        for tier in sorted(t for f, t in found if f == family):
            c = found[(family, tier)]
            tuned_loss = "–" if c.tuned_loss is None else f"{c.tuned_loss:.4f}"
            if c.best_is_tuned:
                moved = "held"
            elif c.held:
                moved = f"held ({c.gain:.4f} ≤ {MARGIN:g})"
            elif c.gain is None:
                moved = "moved: the tuned setting diverged or failed" if c.complete else "– (the tuned setting has not finished)"
            else:
                moved = f"moved: {c.gain:.4f}"
            moved += "" if c.complete else " (so far)"
            rows.append([family, f"{tier:.0e}", _text(c.tuned), tuned_loss,
                         "(the same)" if c.best_is_tuned else _text(c.chosen), f"{c.chosen_loss:.4f}", moved,
                         f"{c.finished} of {c.planned if c.planned is not None else c.trials}"])
    return table(head, rows)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m seqbench.protocol.transfer",
                                     description="The transfer check per family and tier: held, or moved to what.")
    parser.add_argument("experiment", help="the tuning experiment: tune_frontier or tune_frontier_ptb")
    parser.add_argument("--root", type=Path, default=Path("outputs/sweeps"), help="where the chain's sweeps are")
    parser.add_argument("--report", type=Path, help="write transfer.md and its ledger record here")
    args = parser.parse_args(argv)
    started = time.time()
    chain = Chain(args.experiment, args.root)
    tuned, found = chain.checks()
    if not found:
        raise SystemExit(f"no {'transfer check' if tuned else 'search'} has finished a trial under {args.root} "
                         f"for {args.experiment}")
    text = (markdown(found) + "\n\n" + f"Read at {utc_now()} from the sweeps {args.experiment}_transfer_* under "
            f"{args.root}. Selection loss: the best validation loss, on the selection half where the corpus has one; one "
            "seed a trial. A tier's setting is its best checked trial (a diverged one never) where it saves more "
            f"than {MARGIN:g} nats over the tuned setting (about the median seed sd of the untuned frontier's repeated "
            "cells); \"held\": the tuned setting stays. Trials finished: completed, diverged or failed, of those the chain plans; \"(so far)\": the check is still running and moves nothing yet.")
    print(text)
    if args.report:
        args.report.mkdir(parents=True, exist_ok=True)
        (args.report / "transfer.md").write_text(f"# The transfer check: {args.experiment}\n\n{text}\n", encoding="utf-8")
        write_record(args.report, ["transfer.md"], command_line("seqbench.protocol.transfer", argv or sys.argv[1:]), started)
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
