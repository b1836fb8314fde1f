"""The preset a run was composed with, read from its Hydra group choices, for runs of both layouts.

Issue 34 moved presets from `+family=<corpus>/<name>` (conf/family/) to `preset=<corpus>/<name>`
(conf/preset/); a run directory recorded before keeps `family: ptb/lstm` in its `.hydra/hydra.yaml`,
one recorded after says `preset: ptb/lstm`. Everything that reads the choice reads it here, so old
and new runs are grouped, named and tagged alike.
"""

from __future__ import annotations

from collections.abc import Mapping


def preset_of(choices: Mapping | None) -> str | None:
    """`ptb/lstm` from `{"preset": "ptb/lstm"}` or, for a run from before issue 34, from
    `{"family": "ptb/lstm"}`."""
    choices = choices or {}
    return choices.get("preset") or choices.get("family")
