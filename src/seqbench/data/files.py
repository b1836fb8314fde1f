"""Locating corpus files: a local folder first, then the public source, always checksum-verified.

A corpus lives in `<data_dir>/<corpus>/` (the layout of `../shared/data`). When a file is missing
it is downloaded from its public source and checked against the published sha256; when it cannot
be downloaded (no network) the user gets one sentence naming the folder and how to fill it. A file
that exists but does not match its checksum is never overwritten: the user may have put it there.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from seqbench.errors import ChecksumError, DataNotFoundError

DOWNLOAD_TIMEOUT_S = 30


@dataclass(frozen=True)
class CorpusFile:
    """One file of a corpus: its name in the corpus folder, published sha256 and public URL."""

    name: str
    sha256: str | None  # None for user-provided files, which have no published checksum
    url: str | None = None
    member: str | None = None  # the url is a zip archive holding the file under this name (enwik8.zip)


def sha256_of(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, expected: str | None) -> None:
    """Raise `ChecksumError` if `path` is not the published file."""
    if expected is not None:
        check_digest(path, sha256_of(path), expected)


def check_digest(path: Path, actual: str, expected: str) -> None:
    """Raise `ChecksumError` if the sha256 `actual` of `path` (hashed by the caller, e.g. from the bytes it
    has read anyway) is not the published `expected`."""
    if actual != expected:
        raise ChecksumError(
            f"{path} has sha256 {actual[:12]}… but the published file has {expected[:12]}…: the file is "
            f"corrupt or a different version; replace it with the original (or delete it to re-download)."
        )


def _folder_lock(folder: Path) -> FileLock:
    """Serialise downloads into one folder across processes (DDP ranks all call prepare_data)."""
    folder.mkdir(parents=True, exist_ok=True)
    return FileLock(folder / ".seqbench.lock")


def _download(url: str, dest: Path, member: str | None = None) -> None:
    """Download to a temporary name first so an interrupted download never looks like a file; with
    `member`, the download is a zip archive and `dest` becomes that member of it (the archive is not kept)."""
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as resp:
            shutil.copyfileobj(resp, out)
        if member is not None:
            _unzip(Path(tmp), member, dest)
        else:
            os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _unzip(archive: Path, member: str, dest: Path) -> None:
    """Write one member of a zip archive to `dest`, through a temporary name as `_download` does."""
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    try:
        with os.fdopen(fd, "wb") as out, zipfile.ZipFile(archive) as zipped, zipped.open(member) as src:
            shutil.copyfileobj(src, out)
        os.replace(tmp, dest)
    except (zipfile.BadZipFile, KeyError) as exc:  # not an archive, or not the file it should hold
        raise OSError(f"{archive.name} is not a zip archive holding {member} ({exc})") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def ensure_files(folder: Path, files: list[CorpusFile], corpus: str, hint: str = "",
                 download: bool = True) -> dict[str, Path]:
    """Return the verified path of every file, downloading the missing ones.

    Raises `DataNotFoundError` with one sentence when a file is missing and cannot be fetched, and
    `ChecksumError` when a file (found or downloaded) is not the published one.
    """
    folder = Path(folder)
    paths: dict[str, Path] = {}
    missing = [f for f in files if not (folder / f.name).is_file()]
    if missing and not download:
        raise DataNotFoundError(
            f"{corpus}: {', '.join(f.name for f in missing)} not found in {folder} (downloads are off: "
            f"data.download=false); put the files there, or point data.data_dir (or SEQBENCH_DATA_DIR) at a "
            f"folder holding {folder.name}/{hint}."
        )
    if missing:
        try:
            with _folder_lock(folder):
                for f in missing:
                    dest = folder / f.name
                    if dest.is_file():  # another rank fetched it while we waited
                        continue
                    if f.url is None:
                        raise OSError("no public source")
                    _download(f.url, dest, f.member)
                    try:
                        verify(dest, f.sha256)
                    except ChecksumError:
                        dest.unlink()  # our own download, safe to remove
                        raise
        except (OSError, urllib.error.URLError) as exc:
            names = ", ".join(f.name for f in missing)
            raise DataNotFoundError(
                f"{corpus}: {names} not found in {folder} and not downloadable here ({exc.__class__.__name__}: "
                f"{getattr(exc, 'reason', exc)}); put the files there, or point data.data_dir (or the "
                f"SEQBENCH_DATA_DIR environment variable) at a folder holding {folder.name}/{hint}."
            ) from None
    for f in files:
        path = folder / f.name
        verify(path, f.sha256)
        paths[f.name] = path
    return paths
