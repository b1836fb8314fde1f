"""Processes that share a data folder wait for each other: one downloads a corpus file or trains a
subword tokenizer while the others (DDP ranks, parallel sweep jobs) wait and then use its result.

Each test holds the lock as another process would (`filelock.FileLock` on the same file), starts the
call in a thread, and checks that the call waits and then takes the file the holder left, without
doing the work again. Without the lock the call would download (from a URL that does not exist here)
or train a tokenizer of its own at once.
"""

from __future__ import annotations

import hashlib
import threading

from filelock import FileLock

from seqbench.data.files import CorpusFile, ensure_files
from seqbench.data.subword import cached_tokenizer, train_tokenizer

WAIT_S = 0.5


def _start(fn) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except Exception as exc:  # re-raised in the test's thread by the assertions below
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_a_download_waits_for_the_process_that_holds_the_folder_and_uses_its_file(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    content = b"the other process fetched this\n"
    wanted = CorpusFile("train.txt", hashlib.sha256(content).hexdigest(), url=(tmp_path / "nowhere").as_uri())
    with FileLock(folder / ".seqbench.lock"):
        thread, out = _start(lambda: ensure_files(folder, [wanted], "corpus"))
        thread.join(WAIT_S)
        assert thread.is_alive(), f"ensure_files did not wait for the folder's lock: {out}"
        (folder / "train.txt").write_bytes(content)
    thread.join(10)
    assert "error" not in out, out["error"]
    assert out["value"]["train.txt"].read_bytes() == content


def test_a_tokenizer_is_trained_once_while_the_other_processes_wait(tmp_path):
    key = {"name": "bpe", "vocab_size": 40, "kind": "bpe"}
    lines = ["a small corpus of words", "and a few more words here"] * 20
    calls: list[int] = []

    def training_lines():
        calls.append(1)
        return lines

    holder = cached_tokenizer(tmp_path / "warm", key, lambda: lines)  # the file the other process writes
    path = next((tmp_path / "warm").glob("bpe-*.json"))
    cache = tmp_path / "cache"
    cache.mkdir()
    with FileLock(cache / path.with_suffix(".lock").name):
        thread, out = _start(lambda: cached_tokenizer(cache, key, training_lines))
        thread.join(WAIT_S)
        assert thread.is_alive(), f"cached_tokenizer did not wait for the tokenizer's lock: {out}"
        (cache / path.name).write_bytes(path.read_bytes())
    thread.join(10)
    assert "error" not in out, out["error"]
    assert calls == []  # loaded what the holder saved, not trained again
    assert out["value"].encode("a few words") == holder.encode("a few words")
    assert train_tokenizer(lines, 40).encode("a few words") == holder.encode("a few words")
