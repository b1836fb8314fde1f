"""WikiText-2 (Merity et al. 2016), word level, the tokenised `wikitext-2-v1` variant.

Local files come first: `<data_dir>/wikitext2/` holding either `wiki.{train,valid,test}.tokens`
(the original release) or `{train,valid,test}.txt`. Without them, and with internet, the corpus is
fetched through `datasets` (the `hub` extra: `pip install -e ".[hub]"`) from the public hub (`Salesforce/wikitext`, config `wikitext-2-v1`), whose
cache keeps it, and written into the folder in the original one-line-per-row format so later runs
and other tools read plain files. The hub copy carries no published checksum, so none is checked;
local files are read as they are.
"""

from __future__ import annotations

from pathlib import Path

from seqbench.data.lm import SPLITS, LanguageModelDataModule
from seqbench.errors import DataNotFoundError

HUB_NAME, HUB_CONFIG = "Salesforce/wikitext", "wikitext-2-v1"
_HUB_SPLIT = {"train": "train", "valid": "validation", "test": "test"}
_LAYOUTS = ({s: f"wiki.{s}.tokens" for s in SPLITS}, {s: f"{s}.txt" for s in SPLITS})


class WikiText2DataModule(LanguageModelDataModule):
    corpus = "wikitext2"

    def _local_files(self) -> dict[str, Path] | None:
        for layout in _LAYOUTS:
            paths = {split: self.folder / name for split, name in layout.items()}
            if all(p.is_file() for p in paths.values()):
                return paths
        return None

    def _fetch_from_hub(self) -> dict[str, Path]:
        if not self.download:
            raise DataNotFoundError(
                f"WikiText-2: no wiki.{{train,valid,test}}.tokens or {{train,valid,test}}.txt in {self.folder} "
                f"(downloads are off: data.download=false); put the files there, or point data.data_dir "
                f"(or SEQBENCH_DATA_DIR) at a folder holding wikitext2/."
            )
        try:
            import datasets
        except ImportError:
            raise DataNotFoundError(
                f"WikiText-2: no wiki.{{train,valid,test}}.tokens or {{train,valid,test}}.txt in {self.folder}, and "
                f"fetching it from the hub needs the datasets package; install it with `pip install -e \".[hub]\"`, "
                f"or put the files there (or point data.data_dir or SEQBENCH_DATA_DIR at a folder holding wikitext2/)."
            ) from None
        try:
            splits = datasets.load_dataset(HUB_NAME, HUB_CONFIG)
        except Exception as exc:  # offline, hub down, or datasets cannot reach it: say so in one line
            raise DataNotFoundError(
                f"WikiText-2: no wiki.{{train,valid,test}}.tokens or {{train,valid,test}}.txt in {self.folder}, "
                f"and the hub copy ({HUB_NAME}/{HUB_CONFIG}) could not be loaded ({exc.__class__.__name__}); "
                f"put the files there, or point data.data_dir (or SEQBENCH_DATA_DIR) at a folder holding wikitext2/."
            ) from None
        return self.write_rows({split: splits[_HUB_SPLIT[split]]["text"] for split in SPLITS})

    def write_rows(self, rows: dict[str, list[str]]) -> dict[str, Path]:
        """Write hub rows (one original line each, blank lines as '') as wiki.*.tokens files."""
        self.folder.mkdir(parents=True, exist_ok=True)
        paths = {}
        for split, lines in rows.items():
            path = self.folder / f"wiki.{split}.tokens"
            tmp = path.with_suffix(".partial")
            tmp.write_text("\n".join(line.rstrip("\n") for line in lines) + "\n", encoding="utf-8")
            tmp.replace(path)
            paths[split] = path
        return paths

    def split_texts(self) -> dict[str, str]:
        paths = self._local_files() or self._fetch_from_hub()
        return {split: path.read_text(encoding="utf-8") for split, path in paths.items()}
