"""A distributed process destroys its process group on exit (seqbench.callbacks.process_group_exit).

The bug this catches: a gloo group left to the interpreter's finalization, where about one exit in ten
aborts with "terminate called without an active exception" and fails a `ddp_spawn` job after its
training finished (tests/test_ddp_spawn.py met it). That abort is too rare to assert on; what prevents
it is not: the exit handler, checked here in a process of its own, and its place in every trainer.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from conftest import ROOT, compose_cfg

from seqbench.callbacks import DestroyProcessGroupAtExit
from seqbench.training.run import make_trainer

# An exit handler registered before the callback's runs after it (atexit is last in, first out): it
# records whether the group was still there when the process was about to finish.
PROCESS = textwrap.dedent("""
    import atexit, sys
    import torch.distributed as dist
    from seqbench.callbacks import DestroyProcessGroupAtExit

    def record():
        with open(sys.argv[1], "w") as f:
            f.write(str(dist.is_initialized()))

    atexit.register(record)
    dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
    callback = DestroyProcessGroupAtExit()
    for stage in ("fit", "test"):  # ddp's ranks run both stages in one process
        callback.setup(None, None, stage)
""")


def test_a_process_with_a_process_group_destroys_it_when_it_exits(tmp_path):
    done = subprocess.run([sys.executable, "-c", PROCESS, str(tmp_path / "record"), str(tmp_path / "store")],
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "record").read_text() == "False"


def test_without_a_process_group_the_callback_does_nothing():
    DestroyProcessGroupAtExit().setup(None, None, "fit")  # a single-process run: no group, no handler to fail


def test_every_trainer_has_it_even_with_the_callbacks_config_emptied(tmp_path):
    cfg = compose_cfg(["model=lstm", "data=copy", "~callbacks"], tmp_path)
    assert any(isinstance(c, DestroyProcessGroupAtExit) for c in make_trainer(cfg).callbacks)
