"""The resolved configs the presets gave before they were derived from the registry (issue 65), and the
commands that compose them again: what tests/test_presets_unchanged.py compares key by key.

    .venv/bin/python tests/preset_record.py presets tests/fixtures/presets_before_issue65.json   # recorded at ce20a72
    .venv/bin/python tests/preset_record.py all /tmp/before.json   # + debug=fast, every sweep job, every matrix pair

`presets`: every preset file at every size of its `sizes` table (the frontier presets: xxs .. l), as
`preset=<name> [size=<s>] logger=csv` after the experiment that gives it its data (`CONTEXT`). `all`
adds what a one-off check of the derivation compares too: each of those under `debug=fast`, every job of
every experiment that sweeps presets (its other axes at their first value) and `model=X data=Y` for every
pair of the README's matrix (their recipes). Each record is `resolved()` of the composed config.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).parent))
from conftest import CONF, ROOT, compose_cfg  # noqa: E402

# the experiment that gives a preset folder its data (the probe and pretraining presets name none)
CONTEXT = {"probe": ["experiment=long_range"],
           "pretraining": ["experiment=pretraining", "pretrained.bert=x", "pretrained.gpt=x"]}


def resolved(cfg, places: dict[str, str]) -> dict:
    """Every key of `cfg` but Hydra's, flattened (`model.optimizer.lr`) and resolved, with the paths of
    this checkout written as their `places` names."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain.pop("hydra")

    def flat(node, prefix=""):
        for k, v in node.items():
            if isinstance(v, dict) and v:
                yield from flat(v, f"{prefix}{k}.")
            else:
                yield f"{prefix}{k}", v

    text = json.dumps(dict(flat(plain)), sort_keys=True)
    for path, name in sorted(places.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(path, name)
    return json.loads(text)


def resolve(args: list[str], output_dir: Path) -> dict:
    cfg = compose_cfg(args, output_dir)
    return resolved(cfg, {str(output_dir): "<output_dir>", str(ROOT): "<root>",
                          os.environ["SEQBENCH_DATA_DIR"]: "<data_dir>"})


def preset_names() -> list[str]:
    return sorted(p.relative_to(CONF / "preset").with_suffix("").as_posix() for p in (CONF / "preset").rglob("*.yaml"))


def preset_commands() -> list[str]:
    """`preset=<name> [size=<s>]` for every preset file and every size of its table."""
    out = []
    for name in preset_names():
        sizes = OmegaConf.load(CONF / "preset" / f"{name}.yaml").get("sizes") or {}
        out += [f"preset={name}" + (f" size={size}" if size else "") for size in (list(sizes) or [""])]
    return out


def args_of(command: str) -> list[str]:
    """The composition of a recorded command: the preset's data context first, logger=csv after."""
    words = command.split()
    preset = next((w.removeprefix("preset=") for w in words if w.startswith("preset=")), "")
    context = [] if any(w.startswith("experiment=") for w in words) else CONTEXT.get(preset.split("/")[0], [])
    return [*context, *words, "logger=csv"]


def sweep_commands(output_dir: Path) -> list[str]:
    """Every job of every experiment that sweeps presets, its other axes at their first value."""
    out = []
    for path in sorted((CONF / "experiment").glob("*.yaml")):
        cfg = compose_cfg([f"experiment={path.stem}", *CONTEXT.get(path.stem, [])[1:]], output_dir)
        params = OmegaConf.to_container(cfg.hydra.sweeper.params, resolve=True) if cfg.hydra.sweeper.get("params") else {}
        if "preset" not in params:
            continue
        others = [f"{k}={str(v).split(',')[0]}" for k, v in params.items() if k != "preset"]
        extra = ["pretrained.bert=x", "pretrained.gpt=x"] if path.stem == "pretraining" else []
        out += [" ".join([f"experiment={path.stem}", f"preset={p}", *others, *extra]) for p in str(params["preset"]).split(",")]
    return out


def pair_commands() -> list[str]:
    from seqbench.analysis.matrix import pairs

    return [f"model={m} data={d}" for m, d in pairs()]


def record(which: str, out: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        commands = preset_commands()
        if which == "all":
            commands += [f"{c} debug=fast" for c in commands] + sweep_commands(tmp_path) + pair_commands()
        records = {}
        for i, command in enumerate(commands):
            try:
                records[command] = resolve(args_of(command), tmp_path)
            except Exception as exc:  # a pair that needs an experiment's value: recorded as its error
                records[command] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}
            print(f"{i + 1}/{len(commands)} {command}", file=sys.stderr, flush=True)
    out.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    record(sys.argv[1], Path(sys.argv[2]))
