"""Shared fixtures: configs composed exactly as `src/train.py` composes them, small and on the CPU.

Tests read real corpora from `$SEQBENCH_DATA_DIR` (CI points it at ../shared/data; without it the
sibling ../shared/data of the checkout is used). Each test gets its own output directory.

One policy for a missing corpus: a test that reads one is marked `@pytest.mark.corpus("name")` (or
calls `require_corpus` where the corpus is a parameter). It skips on a checkout without the data and
fails where `SEQBENCH_REQUIRE_CORPORA=1` — scripts/test.sh, and so CI, sets it — so a green CI run
means every corpus test ran.

`run_cli` runs an entry point as a user types it, forked from a process that has imported torch and
Lightning already (tests/cli_forkserver.py: ~9 s of imports saved a run on a 2-core CI machine);
`SEQBENCH_TEST_FORK=0` starts a new interpreter for every run instead. test_requeue, test_resume and
test_launcher start theirs with subprocess, so the entry points' own start-up is tested as well.

Tests that assert learning take their seed from the `seed` fixture (`SEQBENCH_TEST_SEED`, default 0),
so their margin can be checked under other seeds without editing them:
    SEQBENCH_TEST_SEED=1 python -m pytest tests/test_translation.py --random-order
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
FIXTURES = Path(__file__).parent / "fixtures"
os.environ.setdefault("SEQBENCH_DATA_DIR", str(ROOT.parent / "shared" / "data"))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
DATA_DIR = Path(os.environ["SEQBENCH_DATA_DIR"])
REQUIRE_CORPORA = os.environ.get("SEQBENCH_REQUIRE_CORPORA", "0") == "1"
TEST_SEED = int(os.environ.get("SEQBENCH_TEST_SEED", "0"))
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Under pytest-xdist (scripts/test.sh: one worker per core) each worker keeps to one thread, or the
    # workers' thread pools would oversubscribe the cores; the runs a test starts inherit the setting.
    torch.set_num_threads(int(os.environ.setdefault("OMP_NUM_THREADS", "1")))

sys.path.insert(0, str(ROOT / "src"))
from seqbench.compose import finalize  # noqa: E402
from seqbench.entry import register_resolvers  # noqa: E402

import config_cache  # noqa: E402

register_resolvers()
config_cache.install()  # each config file parsed once per process: a third of each composition's time


def compose_cfg(overrides: list[str], output_dir: Path, config_name: str = "train",
                raw: Callable[[list[str]], DictConfig] | None = None) -> DictConfig:
    """Compose like `src/train.py` does — Hydra, then the recipe and debug bounds of `seqbench.compose`
    — with `${hydra:...}` resolvable and outputs in `output_dir`. `raw` replaces Hydra's composition
    (`compose_raw`) where a test composes many jobs of one sweep (tests/test_readme_commands.py)."""
    raw = raw or (lambda overrides: compose_raw(overrides, output_dir, config_name))
    cfg = raw(overrides)
    if config_name != "train":
        return cfg
    choices = {k: v for k, v in cfg.hydra.runtime.choices.items() if isinstance(v, str)}
    return finalize(cfg, overrides, choices, raw)


def compose_raw(overrides: list[str], output_dir: Path, config_name: str = "train") -> DictConfig:
    """Hydra's composition alone (no recipe), as the current Hydra config, outputs in `output_dir`."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(output_dir)
        cfg.hydra.job.num = 0
    HydraConfig.instance().set_config(cfg)
    return cfg


def model_config(name: str) -> DictConfig:
    """conf/model/<name>.yaml merged over the model yamls it inherits (`gru` over `lstm`, `ssm` over
    `mingru`): enough to read its target and selector keys without composing a run."""
    cfg = OmegaConf.load(CONF / "model" / f"{name}.yaml")
    parents = [d for d in cfg.get("defaults", [])
               if isinstance(d, str) and (CONF / "model" / f"{d}.yaml").is_file()]
    plain = OmegaConf.to_container(cfg, resolve=False)  # keeps a value left to the command line (`mixer: ???`)
    own = OmegaConf.create({k: v for k, v in plain.items() if k != "defaults"})
    return OmegaConf.merge(*[model_config(p) for p in parents], own)


TINY = [
    "logger=csv", "trainer=cpu", "trainer.max_epochs=1", "trainer.limit_train_batches=4",
    "trainer.limit_val_batches=2", "trainer.limit_test_batches=2", "trainer.num_sanity_val_steps=0",
    "trainer.enable_progress_bar=false", "~callbacks.model_summary", "~callbacks.progress_bar",
]
TINY_RNN = ["model.embedding_size=16", "model.hidden_size=16"]


@pytest.fixture
def cfg_factory(tmp_path):
    def make(overrides: list[str], tiny: bool = True, config_name: str = "train") -> DictConfig:
        return compose_cfg((TINY + TINY_RNN if tiny else []) + overrides, tmp_path, config_name)

    return make


def run_cli(args: list[str], tmp_path: Path, script: str = "train.py", timeout: int = 600,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """Run an entry point as a user would, with outputs under tmp_path: forked from a process that has
    imported torch and Lightning already (tests/cli_forkserver.py), or a new process (SEQBENCH_TEST_FORK=0)."""
    cmd = [sys.executable, str(ROOT / "src" / script), *args, f"paths.log_dir={tmp_path}"]
    full_env = {**os.environ, "HYDRA_FULL_ERROR": "0", **(env or {})}
    forked = _fork_server(full_env)
    done = forked.run(cmd, tmp_path, full_env, timeout) if forked else None
    if done is None:  # an environment a fork cannot give (cli_forkserver.FIXED_AT_IMPORT)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp_path, env=full_env)
    return done


_FORK_SERVER: list = []


def _fork_server(env: dict[str, str]):
    """This test process's fork server, started on first use; None where SEQBENCH_TEST_FORK=0."""
    if os.environ.get("SEQBENCH_TEST_FORK", "1") == "0":
        return None
    if not (_FORK_SERVER and _FORK_SERVER[0].alive()):
        import atexit

        from cli_forkserver import Client

        _FORK_SERVER[:] = [Client(env)]
        atexit.register(_FORK_SERVER[0].close)
    return _FORK_SERVER[0]


def require_corpus(name: str) -> None:
    """Skip when `$SEQBENCH_DATA_DIR/<name>` is missing, or fail where SEQBENCH_REQUIRE_CORPORA=1."""
    if (DATA_DIR / name).exists():
        return
    message = f"{name} is not in SEQBENCH_DATA_DIR ({DATA_DIR})"
    if REQUIRE_CORPORA:
        pytest.fail(f"{message}, and SEQBENCH_REQUIRE_CORPORA=1 (scripts/test.sh) requires every corpus", pytrace=False)
    pytest.skip(message)


def pytest_runtest_setup(item):
    for mark in item.iter_markers("corpus"):
        for name in mark.args:
            require_corpus(name)


@pytest.fixture
def seed() -> int:
    """The seed of a test that asserts learning (SEQBENCH_TEST_SEED, default 0); torch is seeded with it."""
    torch.manual_seed(TEST_SEED)
    return TEST_SEED


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """A test may pin torch to one thread (bit-stable sums); the next test runs with the thread count
    it would have alone, whatever ran before it."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
