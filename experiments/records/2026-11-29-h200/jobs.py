"""This session's GPU jobs (h200_jobs.jsonl: every job the H200 finished, as its archive entry) and each CPU run of
the same job in the committed archive (experiments/sweeps/), as jobs.csv:
    python experiments/records/2026-11-29-h200/jobs.py > experiments/records/2026-11-29-h200/jobs.csv"""
import csv
import json
import sys
from pathlib import Path

here = Path(__file__).resolve().parent
gpu = [json.loads(line) for line in (here / "h200_jobs.jsonl").read_text().splitlines()]
keys = {json.dumps(e["key"], sort_keys=True) for e in gpu}
cpu = [dict(e, sweep=path.stem) for path in sorted((here.parents[1] / "sweeps").glob("*.jsonl"))
       for e in map(json.loads, path.read_text().splitlines())
       if json.dumps(e["key"], sort_keys=True) in keys and "H200" not in e["metrics"]["device"]]
out = csv.writer(sys.stdout)
out.writerow(["sweep", "family", "lr_scale", "tokens_per_step", "device", "val_loss_best", "wall_time_s",
              "max_steps", "train_tokens_per_s", "started"])
for e in sorted(gpu + cpu, key=lambda e: (e["sweep"], e["key"]["lr_scale"], e["key"]["tokens_per_step"], e["metrics"]["date"])):
    m, k = e["metrics"], e["key"]
    out.writerow([e["sweep"], k["family"], k["lr_scale"], k["tokens_per_step"], m["device"].split(" (")[0],
                  f"{m['val/loss_best']:.4f}", f"{m['wall_time_s']:.0f}", m["budget/max_steps"],
                  f"{m['train/tokens_per_s']:.0f}", m["date"][:19]])
