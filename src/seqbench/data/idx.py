"""IDX files (LeCun's MNIST format), read with numpy: header checked, checksum verified, file named on error.

    offset  type            value
    0       int32 (BE)      magic: 0x00000800 | (type code << 8) | number of dimensions
                            (2049 = uint8, 1 dim: labels; 2051 = uint8, 3 dims: images)
    4       int32 (BE) x n  size of each dimension
    4+4n    uint8 ...       the data, row-major (for images: item, row, column)

The published checksums of MNIST are of the decompressed bytes, so a file stored as `.gz` (ours
are) is decompressed first and the sha256 is taken of what comes out. A truncated download fails
here with the file's name, instead of as a reshape error deep inside numpy.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from pathlib import Path

import numpy as np

from seqbench.errors import ChecksumError

UINT8 = 0x08


class IDXError(ChecksumError):
    """An IDX file is truncated, corrupt or not the file its name says it is."""


def read_idx_bytes(path: Path) -> bytes:
    """The IDX bytes of `path`, decompressing `.gz`; a broken gzip stream names the file."""
    path = Path(path)
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (EOFError, OSError, zlib.error) as exc:
        raise IDXError(f"{path} cannot be read as {'gzip' if path.suffix == '.gz' else 'IDX'} ({exc}): the file "
                       f"is truncated or corrupt; replace it with the original (or delete it to re-download).") from None


def parse_idx(raw: bytes, name: str = "IDX file", ndim: int | None = None) -> np.ndarray:
    """Bytes of an IDX file -> uint8 array of its shape; `ndim` (1 labels, 3 images) is checked when given."""
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise IDXError(f"{name} does not start with an IDX magic number (got {raw[:4].hex() or 'nothing'}); "
                       f"it is not an IDX file.")
    dtype_code, dims = raw[2], raw[3]
    if dtype_code != UINT8:
        raise IDXError(f"{name} holds data of type code 0x{dtype_code:02x}; only uint8 (0x08) IDX files are read.")
    if ndim is not None and dims != ndim:
        raise IDXError(f"{name} has {dims} dimensions (magic {int.from_bytes(raw[:4], 'big')}) but {ndim} were "
                       f"expected (magic {0x800 + ndim}); is it the images file where the labels belong, or the other way round?")
    header = 4 + 4 * dims
    if len(raw) < header:
        raise IDXError(f"{name} is truncated inside its header ({len(raw)} bytes).")
    shape = tuple(int(d) for d in np.frombuffer(raw, dtype=">i4", count=dims, offset=4))
    expected = header + int(np.prod(shape, dtype=np.int64))
    if len(raw) != expected:
        what = "truncated" if len(raw) < expected else "longer than its header says"
        raise IDXError(f"{name} is {what}: its header gives shape {shape} ({expected} bytes) but it has "
                       f"{len(raw)} bytes; replace it with the original.")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(shape)


def read_idx(path: Path, sha256: str | None = None, ndim: int | None = None) -> np.ndarray:
    """Read and verify one IDX file (plain or `.gz`); the checksum is of the decompressed bytes."""
    raw = read_idx_bytes(path)
    if sha256 is not None:
        actual = hashlib.sha256(raw).hexdigest()
        if actual != sha256:
            raise IDXError(f"{path} decompresses to bytes with sha256 {actual[:12]}… but the published file has "
                           f"{sha256[:12]}…: the file is corrupt or a different version; replace it with the original.")
    return parse_idx(raw, str(path), ndim)
