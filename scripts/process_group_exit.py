"""How often two spawned gloo ranks fail at exit, with and without destroying their process group.

The measurement behind `seqbench.callbacks.process_group_exit`: each spawn starts two workers that
join a gloo group, all-reduce and return (rank zero lingers 50 ms, as it does while it hands its results
back); a worker that aborts at exit ("terminate called without an active exception") fails the spawn.

    .venv/bin/python scripts/process_group_exit.py --destroy none --spawns 30
    .venv/bin/python scripts/process_group_exit.py --destroy atexit --spawns 60
"""

from __future__ import annotations

import argparse
import atexit
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def destroy() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def worker(rank: int, how: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    if how == "atexit":
        atexit.register(destroy)
    t = torch.ones(1000)
    for _ in range(20):
        dist.all_reduce(t)
    if rank == 0:
        time.sleep(0.05)
    if how == "end":
        destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--destroy", choices=["none", "end", "atexit"], default="none",
                        help="never, at the end of the worker, or in an atexit handler")
    parser.add_argument("--spawns", type=int, default=30)
    parser.add_argument("--port", type=int, default=29500, help="the first of 200 ports used in turn")
    args = parser.parse_args()
    failed = 0
    for i in range(args.spawns):
        try:
            mp.spawn(worker, args=(args.destroy, args.port + i % 200), nprocs=2)
        except mp.ProcessExitedException as exc:
            failed += 1
            print(f"spawn {i}: {exc}", flush=True)
    print(f"destroy={args.destroy}: {failed} of {args.spawns} spawns failed (torch {torch.__version__})")


if __name__ == "__main__":
    main()
