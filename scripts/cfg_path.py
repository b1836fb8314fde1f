"""The path a run's config takes from `train`: every function of seqbench that is handed the config (or a
node of it) while a tiny tuned run trains, the modules they live in, and the calls that climb against the
rooms' order (`seqbench.rooms`, a module of an older tree placed by `scripts/import_graph.MOVED`).

    python3 scripts/cfg_path.py                       # this checkout
    python3 scripts/cfg_path.py <other checkout>      # an older commit's tree (its src/ and conf/)
    python3 scripts/cfg_path.py -v                    # and list the steps

Run it with the checkout's virtual environment's Python (it trains a 16-unit LSTM for two steps on PTB under
a `tune:` block, `experiment=tune_frontier_ptb`: the path the issue followed, through the tuning setting).
A step is a first call of a function with the config in its arguments; a climb is a call from a function of
one room into a function of a room above it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
OVERRIDES = ["experiment=tune_frontier_ptb", "preset=frontier/ptb/lstm", "size=xxs", "budget.flops=1e9",
             "tune.lr_scale=1", "tune.tokens_per_step=280", "trainer.limit_val_batches=1", "trainer.limit_test_batches=1",
             "test=true", "logger=csv", "~callbacks.model_summary", "~callbacks.progress_bar"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", nargs="?", type=Path, default=HERE)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(HERE / "scripts"))
    from import_graph import ROOMS, home, room_of  # this checkout's order, and where older modules went

    # the checkout's own package from here on (import_graph read this one's order: forget it, keep the order)
    sys.path[:] = [p for p in sys.path if Path(p).resolve() != (HERE / "src").resolve()]
    for name in [m for m in sys.modules if m == "seqbench" or m.startswith("seqbench.")]:
        del sys.modules[name]
    sys.path.insert(0, str(args.checkout / "src"))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from omegaconf import DictConfig

    import seqbench.compose as compose
    entry = importlib.import_module("seqbench.entry")
    entry.register_resolvers() if hasattr(entry, "register_resolvers") else compose.register_resolvers()
    run = None
    for name in ("seqbench.training.run", "seqbench.run"):
        try:
            run = importlib.import_module(name)
            break
        except ModuleNotFoundError:
            continue
    out = Path(tempfile.mkdtemp(prefix="cfg_path_"))
    cwd = os.getcwd()
    os.chdir(out)
    cfg = compose.compose_final(OVERRIDES, conf_dir=args.checkout / "conf")
    choices = {k: v for k, v in cfg.hydra.runtime.choices.items() if isinstance(v, str)}

    def holds_cfg(frame) -> bool:
        for value in frame.f_locals.values():
            if value is cfg or (isinstance(value, DictConfig) and value._get_root() is cfg):
                return True
        return False

    steps: list[tuple[str, str]] = []
    climbs: list[str] = []
    seen = set()

    def profile(frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("seqbench") or frame.f_code.co_name.startswith("<") or not holds_cfg(frame):
            return  # a comprehension is a line of its function, not a step of the path
        step = (module, frame.f_code.co_name)
        if step in seen:
            return
        seen.add(step)
        steps.append(step)
        caller = frame.f_back
        while caller is not None and (not caller.f_globals.get("__name__", "").startswith("seqbench")
                                      or caller.f_code.co_name.startswith("<")):
            caller = caller.f_back
        if caller is not None:
            mine, theirs = room_of(home(caller.f_globals["__name__"])), room_of(home(module))
            if mine is not None and theirs is not None and theirs > mine:
                climbs.append(f"{caller.f_globals['__name__']}.{caller.f_code.co_name} ({ROOMS[mine][0]}) -> "
                              f"{module}.{frame.f_code.co_name} ({ROOMS[theirs][0]})")

    sys.setprofile(profile)
    try:
        run.train(cfg, out, choices, OVERRIDES)
    finally:
        sys.setprofile(None)
        os.chdir(cwd)
    modules = list(dict.fromkeys(m for m, _ in steps))
    print(f"{run.__name__}.train: the config reaches {len(modules)} modules in {len(steps)} steps, "
          f"{len(climbs)} of them climbing against the rooms' order")
    if args.verbose:
        print("\n".join(["", "steps:", *(f"{m}.{f}" for m, f in steps), "", "climbing:", *climbs]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
