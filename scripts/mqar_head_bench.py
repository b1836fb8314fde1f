"""MQAR's training step with the output layer at every position against the head at the queried positions alone.

    python scripts/mqar_head_bench.py transformer lstm mingru      # families of conf/preset/mqar/

One thread, CPU time (process time) of a forward and backward of one training batch of experiment=mqar at
width 64, (T 64, B 64) and (T 256, B 32), the second-fastest of four, each mode measured twice in turn; the loss is the
task's (seqbench.tasks.lm), so the only difference is `head_at_positions`. conf/experiment/mqar.yaml cites it.
"""
import sys
import tempfile
from pathlib import Path
import time

import torch
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # conftest.compose_cfg
from conftest import compose_cfg
from seqbench.training.run import build
from seqbench.tasks.lm import LanguageModelling
torch.set_num_threads(1)
out = Path(tempfile.mkdtemp())
for setting in ("t64", "t256"):  # batch 64 and 32 (experiment=mqar's settings)
    for fam in sys.argv[1:]:
        cfg = compose_cfg(["experiment=mqar", f"preset=mqar/{fam}", f"setting={setting}", "data.train_examples=512",
                           "data.val_examples=100", "data.test_examples=100"], out)
        torch.manual_seed(0)
        dm, model = build(cfg)
        dm.setup("fit")
        batch = next(iter(dm.train_dataloader()))
        batch = dm.on_before_batch_transfer(batch, 0) if hasattr(dm, "on_before_batch_transfer") else batch
        task = LanguageModelling.from_spec(dm.spec)
        model.train()
        times = {}
        for mode in ("full", "positions", "full", "positions"):
            model.head_at_positions = mode == "positions"
            t = []
            for _ in range(4):
                t0 = time.process_time()
                loss = task.step(model, batch, "val")
                loss.backward()
                model.zero_grad()
                t.append(time.process_time() - t0)
            times[mode] = sorted(t)[1]
        print(f"{setting} {fam} B={batch['input'].shape} full {times['full']:.3f}s positions {times['positions']:.3f}s "
              f"ratio {times['full'] / times['positions']:.1f}x", flush=True)
