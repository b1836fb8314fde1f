"""The README's commands work as written: a README line that no longer composes fails the suite.

"The README" here is README.md and the pages of docs/ it links to (the command catalogue and the
results table moved there). Every `python src/train.py ...` line of them (code blocks and the
results table) is composed as
`src/train.py` composes it — recipe and debug bounds included — and checked as a run checks it
before any work (options, types, model/data pair, checkpoint path); a sweep (`-m`) is expanded one
axis at a time, the experiment's own sweep axes included. A handful run end to end with
`debug=fast`. Every `python -m seqbench...` line names a module whose command line accepts the
README's flags, and those that need no earlier run also run with their smallest arguments.
"""

from __future__ import annotations

import importlib
import itertools
import json
import pickle
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from conftest import CONF, ROOT, compose_cfg, compose_raw, run_cli
from seqbench.training.config_check import check_config

README = "\n".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
PLACEHOLDER = re.compile(r"<[^<>]+>")


def _commands(text: str = README) -> list[str]:
    """Command lines of a page: code-block lines (continuations joined, the block's shell variables
    such as `$COMMON` expanded, `VAR=value` prefixes dropped) and inline `python ...` spans."""
    lines = []
    for block in re.findall(r"```(?:bash|sh)?\n(.*?)```", text, flags=re.S):
        variables: dict[str, str] = {}
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            line = line.removeprefix("export ") if ASSIGNMENTS.fullmatch(line.removeprefix("export ")) else line
            prefix = ASSIGNMENTS.match(line).group()
            variables.update(w.split("=", 1) for w in shlex.split(prefix))
            line = re.sub(r"\$(\w+)", lambda m: variables.get(m.group(1), m.group(0)), line[len(prefix):])
            if line.startswith(("python ", ".venv/bin/python ", "bash scripts/train.sh")):
                lines.append(line)
    spans = (" ".join(span.split()) for span in re.findall(r"`(python [^`]+)`", text))
    lines += [span for span in spans if span not in lines]
    return [line for line in lines if not PROSE.search(line)]


# Forms that stand for a family of commands in the README's prose, not commands: `model=X data=Y`.
# (`--config-path <run>/.hydra` is a command, but of Hydra's launcher: tests/test_recipes.py runs it.)
PROSE = re.compile(r"=[XY]\b|--config-path")
# Shell variables a block sets (`export COMMON="..."`) or a command sets for itself (`OMP_NUM_THREADS=1 python ...`).
ASSIGNMENTS = re.compile(r"(?:[A-Z_][A-Z0-9_]*=(?:\"[^\"]*\"|'[^']*'|\S*)(?:\s+|$))*")


def _train_args(line: str) -> list[str] | None:
    words = shlex.split(line)
    if words[:2] == ["bash", "scripts/train.sh"]:
        return ["model=lstm", "data=ptb", *words[2:]]
    if len(words) > 1 and words[1] == "src/train.py":
        return words[2:]
    return None


TRAIN_LINES = [line for line in _commands() if _train_args(line) is not None]
MODULE_LINES = [line for line in _commands() if line.startswith("python -m seqbench")]


def _fill(args: list[str], tmp_path: Path) -> list[str]:
    """Placeholders (`<ckpt>`, `<run>`, ...) become files that exist; `a|b` alternatives take the first."""
    out = []
    for arg in args:
        if PLACEHOLDER.search(arg):
            key, _, value = arg.partition("=")
            path = tmp_path / PLACEHOLDER.sub("x", value).replace("/", "_")
            if not path.exists():  # a checkpoint is read (safely) before any work: give it a readable one
                torch.save({"state_dict": {}}, path)
            arg = f"{key}={path}"
        out.append(arg)
    return out


def _sweep(args: list[str], tmp_path: Path) -> tuple[list[str], dict[str, list[str]], DictConfig | None]:
    """A multirun as Hydra's basic sweeper sees it: (the fixed overrides, the sweep axes, the first
    job's config). The axes are the command line's comma lists and the experiment's own sweep axes (an
    Optuna search space: the base job); a single run has none, and no config is composed for it."""
    if "-m" not in args and "--multirun" not in args:
        return args, {}, None
    args = [a for a in args if a not in ("-m", "--multirun")]
    axes: dict[str, list[str]] = {}
    fixed = []
    for arg in args:
        key, _, value = arg.partition("=")
        if "," in value and not value.startswith(("[", "'", '"')):
            axes[key] = value.split(",")
        else:
            fixed.append(arg)
    base = compose_cfg(fixed + [f"{k}={v[0]}" for k, v in axes.items()], tmp_path)
    experiment_axes = OmegaConf.select(base, "hydra.sweeper.params") or {}
    for key, values in experiment_axes.items():
        if key.lstrip("+") not in {k.lstrip("+") for k in axes} and "(" not in str(values):
            axes[key] = str(values).split(",")
    return fixed, axes, base


def _sweep_jobs(args: list[str], tmp_path: Path) -> list[list[str]]:
    """The jobs of a multirun as Hydra's basic sweeper makes them: every combination of its axes."""
    fixed, axes, _ = _sweep(args, tmp_path)
    return [fixed + [f"{k}={v}" for k, v in zip(axes, combo)] for combo in itertools.product(*axes.values())]


def _composed_jobs(args: list[str], tmp_path: Path, extra: list[str]) -> Iterator[tuple[list[str], DictConfig]]:
    """(job, config) for every job of `args` plus `extra`, each config the one `compose_cfg(job)` gives.

    Hydra composes a run in two steps: it merges the files the config-group choices select
    (`preset=`, `model=`, `data=`, `recipe=`) — the costly step, a second of the suite's time — then
    sets the plain `key=value` overrides on the result (ConfigLoaderImpl._apply_overrides_to_config).
    Sweep jobs that differ only in plain values (`seed=1,2,3`, `size=s,m,l`, `budget.flops=...`,
    `data.T=...`: 72 jobs on 8 presets for `experiment=frontier`) share the first step, so it runs
    once per choice of groups and Hydra's second step runs per job on a copy. Everything after it —
    the recipe (seqbench.compose.finalize), the debug bounds, the checks — runs per job as before."""
    fixed, axes, base = _sweep(args, tmp_path)
    if base is None:
        yield [*args, *extra], compose_cfg([*args, *extra], tmp_path)
        return
    groups = {g.lstrip("+~") for g in base.hydra.runtime.choices}
    merged: dict[tuple[str, ...], DictConfig] = {}
    for combo in itertools.product(*axes.values()):
        job = fixed + [f"{k}={v}" for k, v in zip(axes, combo)] + extra
        values = [f"{k}={v}" for k, v in zip(axes, combo) if k.lstrip("+~") not in groups]

        def raw(overrides: list[str], values: list[str] = values) -> DictConfig:
            key = tuple(o for o in overrides if o not in values)
            if key not in merged:
                merged[key] = compose_raw(list(key), tmp_path)
            cfg = pickle.loads(pickle.dumps(merged[key]))  # a copy, in a third of copy.deepcopy's time
            ConfigLoaderImpl._apply_overrides_to_config(OverridesParser.create().parse_overrides(values), cfg)
            HydraConfig.instance().set_config(cfg)
            return cfg

        yield job, compose_cfg(job, tmp_path, raw=raw)


def _without_runtime(cfg: DictConfig) -> dict:
    """A config as a run reads it: every key unresolved, and of `hydra` the group choices (the rest of
    `hydra` records the command line itself, which the shortcut of `_composed_jobs` does not rewrite)."""
    plain = OmegaConf.to_container(cfg, resolve=False)
    return {**plain, "hydra": plain["hydra"]["runtime"]["choices"]}


def test_a_families_sweep_trains_every_family_the_same_epochs(tmp_path):
    """experiment=multi30k_families promises 10 epochs for every family; the Transformer preset's own 20
    once won over it (when presets were applied after the experiment, before issue 34)."""
    jobs = _sweep_jobs(["-m", "experiment=multi30k_families"], tmp_path)
    assert len(jobs) == 5
    assert {compose_cfg(job, tmp_path).trainer.max_epochs for job in jobs} == {10}


@pytest.mark.parametrize("line", TRAIN_LINES)
def test_every_readme_training_line_composes_and_passes_the_checks(line, tmp_path):
    args = _fill(_train_args(line), tmp_path)
    # experiment=pretraining: its checkpoints come from two earlier runs
    extra = [f"pretrained.bert={tmp_path / 'bert.ckpt'}", f"pretrained.gpt={tmp_path / 'gpt.ckpt'}"] \
        if any(a.startswith("experiment=pretraining") for a in args) else []
    for job, cfg in _composed_jobs(args, tmp_path, extra):
        check_config(cfg, {k: v for k, v in cfg.hydra.runtime.choices.items() if isinstance(v, str)})
    if job != [*args, *extra]:  # a sweep: its last job, every axis at its last value, composed by Hydra alone
        assert _without_runtime(cfg) == _without_runtime(compose_cfg(job, tmp_path)), job


def test_the_readme_has_the_lines_these_tests_read():
    assert len(TRAIN_LINES) >= 30 and len(MODULE_LINES) >= 10
    assert "python src/train.py model=lstm data=ptb" in TRAIN_LINES


@pytest.mark.parametrize("line", MODULE_LINES)
def test_every_readme_module_line_names_a_command_that_takes_its_flags(line, capsys):
    words = shlex.split(PLACEHOLDER.sub("x", line))
    module = importlib.import_module(words[2])
    main = getattr(module, "main", None)
    assert callable(main), f"{words[2]} has no main()"
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    usage = capsys.readouterr().out
    for flag in (w.split("=")[0] for w in words[3:] if w.startswith("--")):
        assert flag in usage, f"`{line}`: {words[2]} has no option {flag}"


# -- the lines that fail as written were fixed; each runs end to end ------------------------------
def _metrics(tmp_path: Path) -> dict:
    return json.loads(next(tmp_path.glob("debug/runs/*/metrics.json")).read_text())  # debug runs: outputs/debug


def test_a_wider_recurrent_lm_keeps_its_tied_weights(tmp_path):
    """`model=gru data=ptb model.hidden_size=400`: the embedding follows the hidden size when unset."""
    r = run_cli(["model=gru", "data=ptb", "model.hidden_size=400", "trainer.max_epochs=10", "debug=fast", "logger=csv",
                 "trainer.limit_train_batches=2", "trainer.limit_val_batches=1", "trainer.limit_test_batches=1"],
                tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    config = OmegaConf.load(next(tmp_path.glob("debug/runs/*/.hydra/config.yaml")))
    assert config.model.hidden_size == 400 and config.model.embedding_size is None and config.model.tie_weights


def test_a_user_corpus_path_is_read_from_where_the_command_runs(tmp_path):
    (tmp_path / "my").mkdir()
    for name in ("train", "valid"):
        (tmp_path / "my" / f"{name}.txt").write_text("the cat sat on the mat\nthe dog sat\n" * 30)
    r = run_cli(["data=text", "data.train_file=my/train.txt", "data.valid_file=my/valid.txt", "data.level=char",
                 "model.hidden_size=16", "debug=fast", "logger=csv"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _metrics(tmp_path)["status"] == "completed"
    missing = run_cli(["data=text", "data.train_file=nowhere.txt", "data.valid_file=my/valid.txt", "debug=fast"],
                      tmp_path)
    assert missing.returncode == 1 and "data.train_file=nowhere.txt was found neither in" in missing.stderr
    assert "Traceback" not in missing.stderr


# One case per preset and experiment (not one loop): xdist spreads them over the workers (scripts/test.sh).
BOUNDED_BY_DEBUG = [f"preset={p.parent.name}/{p.stem}" for p in sorted((CONF / "preset").glob("*/*.yaml"))]
BOUNDED_BY_DEBUG += [f"experiment={p.stem}" for p in sorted((CONF / "experiment").glob("*.yaml"))]


@pytest.mark.parametrize("preset", BOUNDED_BY_DEBUG)
def test_debug_fast_bounds_every_preset_and_experiment(preset, tmp_path):
    """A preset's own steps (`max_steps: 2000`, 20 epochs, validation every 250 steps) never outlast
    `debug=fast`: at most 5 training batches of one epoch, whatever the preset."""
    cfg = compose_cfg([preset, "debug=fast", "++pretrained.bert=x", "++pretrained.gpt=x"]
                      if "pretraining" in preset else [preset, "debug=fast"], tmp_path)
    t = cfg.trainer
    assert (t.max_epochs, t.limit_train_batches, t.max_steps, t.val_check_interval) == (1, 5, -1, None), preset


def test_the_command_line_still_wins_over_debug_fast(tmp_path):
    cfg = compose_cfg(["preset=shakespeare/gpt", "debug=fast", "trainer.limit_train_batches=7"], tmp_path)
    assert cfg.trainer.limit_train_batches == 7


def test_a_preset_under_debug_fast_trains_five_steps(tmp_path):
    r = run_cli(["preset=shakespeare/gpt", "debug=fast", "logger=csv"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    history = (next(tmp_path.glob("debug/runs/*/csv/metrics.csv"))).read_text().splitlines()
    steps = {int(float(row.split(",")[history[0].split(",").index("step")])) for row in history[1:]}
    assert max(steps) <= 5


# -- analysis commands with their smallest arguments ---------------------------------------------
def test_matrix_runs_as_written(capsys):
    from seqbench.analysis import matrix

    matrix.main([])
    assert "| task: data |" in capsys.readouterr().out


@pytest.mark.slow
def test_model_size_builds_the_presets_whose_data_an_experiment_sets(capsys):
    """The pretraining and probe presets once crashed the walk (their data or checkpoints come from an
    experiment); they are shown built or said why not. Those two groups only: the whole walk composes
    and builds every preset (67 s of the suite), and what it adds is the next test's."""
    from seqbench.analysis import model_size

    text = model_size.main(["--families", "pretraining", "probe", "--models", "lstm"])
    built = [line for line in text.splitlines() if line.startswith("| preset=")]
    assert len(built) >= 5, text
    assert "preset=pretraining/bert_pretrained: not built (needs a value only an experiment sets" in text
    assert "| preset=probe/lstm |" in text
    assert "| model=lstm |" in text and "model=gru" not in text  # --models: those conf/model presets only


def test_model_size_walks_every_preset_group_by_default(monkeypatch):
    """Without --families the walk takes every folder of conf/preset, without --models every conf/model
    preset: a group added later is in the table."""
    from seqbench.analysis import model_size

    walked = {}
    monkeypatch.setattr(model_size, "preset_rows", lambda conf, vocab, groups, models: walked.update(groups=groups,
                                                                                                    models=models) or [])
    model_size.main([])
    assert walked["groups"] == sorted(p.name for p in (ROOT / "conf" / "preset").iterdir() if p.is_dir())
    assert walked["models"] is None  # every conf/model preset
    assert {"ptb", "shakespeare", "pretraining", "probe"} <= set(walked["groups"])


def test_gradient_flow_runs_with_its_smallest_arguments(tmp_path):
    from seqbench.analysis import gradient_flow

    result = gradient_flow.main(["--T", "12", "--n", "2", "--out", str(tmp_path), "--wandb", "disabled"])
    assert result and any(tmp_path.glob("*.png"))


@pytest.mark.slow
@pytest.mark.corpus("ptb")
def test_pipeline_speed_runs_with_its_smallest_arguments(tmp_path, capsys):
    from seqbench.analysis import pipeline_speed

    pipeline_speed.main(["--batches", "5", "--repeats", "1", "--out", str(tmp_path / "ps.csv")])
    table = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    assert {"bare", "seqbench"} <= set(rows), table  # both loops timed, the ratio printed
    assert (tmp_path / "ps.csv").read_text().count("\n") >= 3


def test_every_readme_module_line_is_run_by_a_test():
    """A `python -m seqbench...` line of the README names a command some test runs with real arguments
    (its `main` or its module path), not only its --help."""
    tests = {p.name: p.read_text() for p in (ROOT / "tests").glob("test_*.py")}
    for line in MODULE_LINES:
        module = shlex.split(PLACEHOLDER.sub("x", line))[2]
        name = module.rsplit(".", 1)[-1]
        runners = [n for n, text in tests.items() if re.search(rf"\b{name}\.(main|run)\(", text) or
                   (module in text and n != "test_readme_commands.py")]
        assert runners, f"`{line}`: no test runs {module}"
