"""Rewrite a trusted checkpoint as plain data, so that seqbench's safe loader reads it.

    python -m seqbench.training.convert_checkpoint old.ckpt new.ckpt

seqbench reads checkpoints with torch's weights-only unpickler (`seqbench.checkpoints`), which
refuses a file naming any Python object beyond tensors and plain containers — such as a
checkpoint whose hyperparameters are OmegaConf containers, whose tokenizer is a `tokenizers`
object rather than its JSON text, or whose RNG state holds numpy arrays. This command loads such a
file with the full unpickler, which RUNS whatever code the file names: use it only on a file you
trust (one you or your collaborators wrote). Each such value is replaced by its plain form
(`seqbench.checkpoints.to_plain`), Lightning's `hparams_type` (a class) is dropped, and the result is
written to a new file and read back with `weights_only=True` before the command says it is done.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from seqbench.checkpoints import load_checkpoint, to_plain
from seqbench.entry import run_command
from seqbench.errors import UserError

HPARAMS_TYPE = "hparams_type"  # LightningModule.CHECKPOINT_HYPER_PARAMS_TYPE: the class of the hparams


def convert(source: Path, target: Path) -> list[str]:
    """Write `source` as plain data to `target`; returns what was converted ("where: type")."""
    if not source.is_file():
        raise UserError(f"{source} does not exist; give the checkpoint to convert.")
    if target.resolve() == source.resolve():
        raise UserError(f"the converted checkpoint must go to a new file, not over {source}.")
    ckpt = torch.load(source, map_location="cpu", weights_only=False)  # trusted by the user: see the docstring
    changed: list[str] = []
    if isinstance(ckpt, dict) and HPARAMS_TYPE in ckpt:
        changed.append(f"checkpoint.{HPARAMS_TYPE}: dropped (hyper_parameters stay a plain dict)")
        ckpt = {k: v for k, v in ckpt.items() if k != HPARAMS_TYPE}
    plain = to_plain(ckpt, "checkpoint", changed)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    torch.save(plain, tmp)
    load_checkpoint(tmp, "the converted checkpoint")  # what every seqbench entry point will do with it
    tmp.replace(target)
    return changed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m seqbench.training.convert_checkpoint",
                                     description=__doc__.split("\n\n")[0],
                                     epilog="Loading the source runs any code it names: convert only files you trust.")
    parser.add_argument("source", type=Path, help="the checkpoint to convert (a file you trust)")
    parser.add_argument("target", type=Path, help="where to write the plain-data checkpoint")
    args = parser.parse_args(argv)
    changed = convert(args.source, args.target)
    for line in changed:
        print(f"converted {line}")
    done = f"{len(changed)} value{'s' if len(changed) != 1 else ''} converted" if changed else \
        "nothing needed converting: the source loads safely as it is"
    print(f"wrote {args.target} ({done}); it loads with torch.load(weights_only=True)")


if __name__ == "__main__":
    run_command(main, sys.argv[1:])
