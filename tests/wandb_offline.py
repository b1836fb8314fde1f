"""Read an offline W&B run back from its `run-<id>.wandb` file, with the wandb package's own records.

The file is the run's transaction log, what `wandb sync` uploads: the LevelDB log format
(github.com/google/leveldb/blob/main/doc/log_format.md) behind a 7-byte header (`:W&B`, magic
0xBEE1, version 0) — 32 KiB blocks of chunks, each with a CRC-32 (seeded with the chunk type),
a length and a type (FULL, or FIRST, MIDDLE..., LAST for a record cut across blocks). Each record is
a `wandb.proto.wandb_internal_pb2.Record`. wandb 0.31 reads and writes this log in its Go core and
ships no Python reader, hence the framing here; everything inside a record is wandb's.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from wandb.proto import wandb_internal_pb2 as pb

BLOCK = 32 * 1024
HEADER = struct.Struct("<IHB")  # CRC-32, length, type
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path):
    data = Path(path).read_bytes()
    ident, magic, version = struct.unpack("<4sHB", data[:7])
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), f"{path} is not a W&B transaction log"
    pos, parts = 7, []
    while pos + HEADER.size <= len(data):
        if BLOCK - pos % BLOCK < HEADER.size:  # a block's tail too short for a header is padding
            pos += BLOCK - pos % BLOCK
            continue
        crc, length, kind = HEADER.unpack_from(data, pos)
        chunk = data[pos + HEADER.size:pos + HEADER.size + length]
        pos += HEADER.size + length
        if kind == 0 and length == 0:  # zero padding at the end of a block
            continue
        assert zlib.crc32(chunk, zlib.crc32(bytes([kind]))) == crc, f"bad checksum at byte {pos} of {path}"
        parts.append(chunk)
        if kind in (FULL, LAST):
            record = pb.Record()
            record.ParseFromString(b"".join(parts))
            parts = []
            yield record


def _path(item) -> list[str]:
    return [item.key] if item.key else list(item.nested_key)


def _put(tree: dict, path: list[str], value) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


@dataclass
class OfflineRun:
    """What the W&B server would show for the run: its name, job type, group and tags, config,
    summary, history rows, artifacts, files."""

    dir: Path
    name: str = ""
    job_type: str = ""
    group: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    history: list[dict] = field(default_factory=list)
    artifacts: list = field(default_factory=list)

    @classmethod
    def read(cls, run_dir: Path) -> "OfflineRun":
        """The run as its log holds it once complete: wandb's core process writes the log after
        `wandb.finish()` returns (seen here with model artifacts), so its service is shut down first."""
        import wandb

        wandb.teardown()
        (log,) = Path(run_dir).glob("run-*.wandb")
        run = cls(Path(run_dir))
        for record in records(log):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                info = record.run
                run.name, run.job_type, run.group, run.tags = (info.display_name, info.job_type, info.run_group,
                                                               list(info.tags))
                for item in info.config.update:  # wandb.init(config=...)
                    _put(run.config, _path(item), json.loads(item.value_json))
            elif kind == "config":
                for item in record.config.update:
                    _put(run.config, _path(item), json.loads(item.value_json))
            elif kind == "summary":
                for item in record.summary.update:
                    _put(run.summary, _path(item), json.loads(item.value_json))
            elif kind == "history":
                row: dict = {}
                for item in record.history.item:
                    _put(row, _path(item), json.loads(item.value_json))
                run.history.append(row)
            elif kind == "artifact":
                run.artifacts.append(record.artifact)
        return run

    def table(self, logged: dict) -> dict:
        """The JSON of a table logged in a history row or the summary ({"columns", "data"})."""
        return json.loads((self.dir / "files" / logged["path"]).read_text())
