"""The ledger: the committed records every published number is read from, each with its provenance.

Numbers typed into pages drift from the runs that made them (issue 37 lists eleven). The ledger is
the opposite habit: a page's number is read from a committed file under `experiments/` (a report's
`runs.csv`, an analysis's CSV or JSON, a run's own record) and printed as a link to that file.
Each folder of such files holds a `record.json` saying how they were made:

    {"page": "experiments/frontier.md",
     "records": [{"files": ["report.md", "runs.csv"], "command": "...", "git_commit": "34d0905",
                  "hardware": "2-core AMD EPYC VM, torch 2.13.0+cpu, one thread per run",
                  "date": "2026-11-25", "wall_time": "65 min"}]}

`hardware` and `date` are required: a loss or a tokens/s without its machine and day cannot be
compared with anything, so a record without them is refused. `command`, `git_commit` and
`wall_time` say "not recorded" where the run did not keep them (older runs); they are never guessed.
New results write their record themselves (`seqbench.provenance.write_record`, called by every
writer of results), with the machine and commit measured by `seqbench.provenance`; a training run's
record (`seqbench.training.record`) carries the same fields (`seqbench.training.run`), so one committed without a `record.json`
beside it is its own record.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass
from pathlib import Path

from seqbench.errors import UserError
from seqbench.provenance import NOT_RECORDED, RECORD
from seqbench.training.clocks import wall_seconds
from seqbench.training.record import METRICS

REQUIRED = ("hardware", "date")
OPTIONAL = ("command", "git_commit", "wall_time")


class LedgerError(UserError):
    """A record is missing, incomplete, or a number names a file no record covers."""


@dataclass(frozen=True)
class Record:
    folder: Path          # relative to the repository root
    files: tuple[str, ...]
    hardware: str
    date: str
    command: str = NOT_RECORDED
    git_commit: str = NOT_RECORDED
    wall_time: str = NOT_RECORDED
    page: str = NOT_RECORDED

    @property
    def paths(self) -> list[Path]:
        return [self.folder / f for f in self.files]

    def complete(self) -> bool:
        """Every provenance field known (none says "not recorded")."""
        return all(getattr(self, k) != NOT_RECORDED for k in OPTIONAL)


def read_record(path: Path, root: Path) -> list[Record]:
    """The records of one `record.json`; refused with the reason when hardware or date is missing or a
    listed file does not exist."""
    doc = json.loads(path.read_text())
    folder = path.parent.relative_to(root)
    out = []
    for entry in doc.get("records", []):
        files = tuple(entry.get("files", ()))
        where = f"{path.relative_to(root)} (files {', '.join(files) or 'none'})"
        for key in REQUIRED:
            value = str(entry.get(key) or "").strip()
            if not value or value == NOT_RECORDED:
                raise LedgerError(f"{where}: no {key} recorded; a number without its machine and date cannot be "
                                  f"compared with another, so the ledger refuses it (add \"{key}\" from the page "
                                  f"that describes the run)")
        missing = [f for f in files if not (path.parent / f).is_file()]
        if not files or missing:
            raise LedgerError(f"{where}: lists {'no files' if not files else 'missing files ' + ', '.join(missing)}")
        out.append(Record(folder, files, entry["hardware"], entry["date"], page=doc.get("page", NOT_RECORDED),
                          **{k: str(entry.get(k) or NOT_RECORDED) for k in OPTIONAL}))
    return out


def read_run(path: Path, root: Path) -> Record:
    """A run's own record (`seqbench.training.record`) as a ledger record (`seqbench.training.run` writes date, hardware, git_commit,
    overrides and wall_time_s into it); refused like a record.json without hardware or date."""
    m = json.loads(path.read_text())
    for key in REQUIRED:
        if not m.get(key):
            raise LedgerError(f"{path.relative_to(root)}: no {key} recorded (a run older than the ledger); a number "
                              f"without its machine and date cannot be compared, so add a {RECORD} beside it")

    wall = wall_seconds(m)  # over every segment of a resumed run
    return Record(path.parent.relative_to(root), (path.name,), m["hardware"], m["date"],
                  command=f"python src/train.py {m.get('overrides', '')}".strip(),
                  git_commit=m.get("git_commit") or NOT_RECORDED,
                  wall_time=f"{wall:.0f} s" if wall is not None else NOT_RECORDED)


@dataclass(frozen=True)
class Number:
    """A value and the file it was read from; printed, it is a link to that file."""
    value: float
    path: Path  # relative to the repository root
    text: str

    def md(self, base: Path | str = "experiments") -> str:
        """`[text](path)`, the path relative to the folder of the page it is printed on."""
        return f"[{self.text}]({Path(os.path.relpath(self.path, base)).as_posix()})"


class Ledger:
    """Every record under `<root>/experiments`, and the files they cover, read by path."""
    def __init__(self, root: Path):
        self.root = Path(root)
        self.records = [r for p in sorted((self.root / "experiments").glob(f"**/{RECORD}"))
                        for r in read_record(p, self.root)]
        covered = {p for r in self.records for p in r.paths}
        self.records += [read_run(p, self.root) for p in sorted((self.root / "experiments").glob(f"**/{METRICS}"))
                         if p.relative_to(self.root) not in covered]
        self._by_path = {p: r for r in self.records for p in r.paths}

    def has(self, path: str | Path) -> bool:
        """Whether a record covers `path` (a result that may not have been run yet)."""
        return Path(path) in self._by_path

    def record_of(self, path: str | Path) -> Record:
        path = Path(path)
        if path not in self._by_path:
            raise LedgerError(f"{path} is in no record of the ledger: a number read from it could not say how it "
                              f"was made (add it to its folder's {RECORD})")
        return self._by_path[path]

    def rows(self, path: str | Path) -> list[dict]:
        """A recorded CSV's rows (strings, as written)."""
        self.record_of(path)
        with open(self.root / path, newline="") as f:
            return list(csv.DictReader(f))

    def json(self, path: str | Path) -> dict:
        self.record_of(path)
        return json.loads((self.root / path).read_text())

    def text(self, path: str | Path) -> str:
        self.record_of(path)
        return (self.root / path).read_text()

    def number(self, value: float, path: str | Path, fmt: str = "{:.3f}") -> Number:
        """`value`, read from the recorded file `path`, as a Number that links to it."""
        self.record_of(path)
        return Number(value, Path(path), fmt.format(value))
