"""The model x data matrix of the README, computed from the code: `python -m seqbench.analysis.matrix`.

A family supports a task exactly when it implements the task's method (`seqbench.tasks`), and a
DataModule declares the task it poses, so which pairs run is a fact of the code, not of the prose.
The README's table is this command's output, and `tests/test_matrix.py` checks that they agree, so
the README cannot claim a pair that fails or miss one that runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hydra.utils import get_class
from omegaconf import OmegaConf

from seqbench.families import FAMILIES
from seqbench.tables import table

CONF = Path(__file__).resolve().parents[3] / "conf"


def families() -> dict[str, type]:
    """Each family's LightningModule, in table order (`seqbench.families`)."""
    return {name: fam.cls for name, fam in FAMILIES.items()}


def corpora(conf: Path = CONF) -> dict[str, str]:
    """Each data yaml with the task its DataModule poses."""
    return {p.stem: data_class(conf, p.stem).task for p in sorted((conf / "data").glob("*.yaml"))}


def data_class(conf: Path, name: str) -> type:
    return get_class(OmegaConf.load(conf / "data" / f"{name}.yaml")._target_)


def supports(model_cls: type, data_cls: type) -> bool:
    """The pair runs: the family implements the data's task and, where it reads words on that task
    (BERT, the HMM tagger), the data serves words — the rule `config_check.check_compatible` enforces."""
    task = data_cls.task
    if task not in model_cls.supported_tasks():
        return False
    return task not in getattr(model_cls, "needs_words", ()) or getattr(data_cls, "serves_words", False)


def pairs(conf: Path = CONF) -> list[tuple[str, str]]:
    """Every (model, data) the README marks with a ✓; tests/test_matrix_pairs.py trains a step of each."""
    models = families()
    datas = {d: data_class(conf, d) for d in corpora(conf)}  # each yaml read once, not once per family
    return [(m, d) for d, data_cls in datas.items() for m, cls in models.items() if supports(cls, data_cls)]


def markdown(conf: Path = CONF) -> str:
    models = families()
    rows: dict[tuple[str, bool], list[str]] = {}  # (task, serves words) -> corpora
    for data, task in corpora(conf).items():
        rows.setdefault((task, getattr(data_class(conf, data), "serves_words", False)), []).append(data)
    lines = []
    for (task, words), datas in sorted(rows.items()):
        cells = ["✓" if supports(cls, data_class(conf, datas[0])) else "" for cls in models.values()]
        kind = " (words)" if words else (" (token ids)" if (task, True) in rows else "")
        names = ", ".join(f"`{d}`" for d in datas)
        lines.append([f"{task}{kind}: {names}", *cells])
    return table(["task: data", *(f"`{m}`" for m in models)], lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conf", type=Path, default=CONF)
    print(markdown(parser.parse_args(argv).conf))


if __name__ == "__main__":
    main()
