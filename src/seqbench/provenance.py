"""Where and when a number was made: the machine, the code, the date, the command.

A throughput or a wall time means nothing without the machine it ran on, and a loss means little
without the commit and the command that made it: the pages drifted from their runs exactly where
these were typed by hand (issue 37). Every writer of results (a run's record, a report's
`runs.csv`, an analysis's CSV) takes them from here, so they are measured, not remembered.

Only the standard library and torch (already imported by every writer) are used: reading the CPU
model from `/proc/cpuinfo` is what `lscpu`'s "Model name" reads too.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

NOT_RECORDED = "not recorded"
RECORD = "record.json"  # beside the files it says how they were made (seqbench.reports.ledger reads them)


def git_commit(root: Path | None = None) -> str | None:
    """The short commit of HEAD at `root` (default: this package's checkout); None outside a git tree."""
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root or Path(__file__).resolve().parent,
                             capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def cpu_model() -> str:
    """The CPU's model name as `lscpu` prints it ("AMD EPYC ...", "Intel(R) Xeon(R) ..."); platform's
    processor name (often just the architecture) where /proc/cpuinfo is absent."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or NOT_RECORDED


def hardware() -> str:
    """One line naming the machine: CPU model and cores, the GPU where torch sees one, torch's version
    and its thread count (a CPU number depends on all three)."""
    import torch

    threads = torch.get_num_threads()
    text = f"{cpu_model()}, {os.cpu_count()} cores, torch {torch.__version__}, {threads} thread{'s' * (threads != 1)}"
    if torch.cuda.is_available():
        text += f"; {torch.cuda.get_device_name()} x{torch.cuda.device_count()}"
    return text


def utc_now() -> str:
    """ISO 8601 in UTC to the second: the pages' dates are UTC."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def command_line(prog: str | None = None, argv: list[str] | None = None) -> str:
    """The command as a user would retype it: `python -m <prog> <args>` (or `python <script> <args>`)."""
    argv = sys.argv[1:] if argv is None else argv
    head = f"python -m {prog}" if prog else f"python {sys.argv[0]}"
    return " ".join([head, shlex.join(argv)]).strip()


def write_record(folder: Path, files: list[str], command: str, started: float, page: str | None = None) -> Path:
    """Record how `files` (in `folder`) were just made: the command, this checkout's commit, this machine,
    the date and the wall time since `started` (time.time()). An earlier record of the same files is
    replaced; records of the folder's other files are kept."""
    path = Path(folder) / RECORD
    doc = json.loads(path.read_text()) if path.is_file() else {"records": []}
    if page:
        doc["page"] = page
    doc["records"] = [e for e in doc.get("records", []) if not set(e.get("files", ())) & set(files)]
    doc["records"].append({"files": sorted(files), "command": command, "git_commit": git_commit() or NOT_RECORDED,
                           "hardware": hardware(), "date": utc_now(),
                           "wall_time": f"{time.time() - started:.0f} s"})
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return path
