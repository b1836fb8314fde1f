"""Task-aware recipes: `model=X data=Y` trains with the recipe the family needs for the data's task.

The recipe is chosen from the model and the task (seqbench.compose); the command line, experiments and
presets win over it; the run's saved config shows the values used, the log names the recipe, and the
saved config composes to the same run again.
"""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from conftest import CONF, FIXTURES, compose_cfg, model_config, run_cli
from seqbench.analysis.matrix import data_class, pairs
from seqbench.compose import family_of, recipe_file, recipe_for, task_of


def test_every_matrix_pair_has_a_recipe_file(tmp_path):
    """Each ✓ of the README matrix trains from `model=X data=Y` with a recipe written for its task."""
    missing = []
    for model, data in pairs():
        cfg = OmegaConf.create({"model": model_config(model),  # with what it inherits (gru: lstm's target)
                                "data": OmegaConf.load(CONF / "data" / f"{data}.yaml")})
        name, path = recipe_for(cfg)
        if not path.is_file():
            missing.append(f"{model} x {data}: conf/recipe/{name}.yaml")
    assert not missing, missing


# What each recipe set, per family and recipe (one corpus each), recorded before the 17 alias recipes
# (`conf/recipe/<task>/gru.yaml` = "the LSTM's with the GRU cell", ...) gave way to the base family's
# file (commit 26afb34): the keys whose values differ from the same command with `recipe=none`.
BEFORE = json.loads((FIXTURES / "recipes_before_issue34.json").read_text())


def _flat(node, prefix=""):
    for k, v in node.items():
        if k == "hydra":
            continue
        yield from _flat(v, f"{prefix}{k}.") if isinstance(v, dict) else [(f"{prefix}{k}", v)]


def _recipe_effect(args: list[str], tmp_path) -> dict:
    a = dict(_flat(OmegaConf.to_container(compose_cfg(args, tmp_path), resolve=False)))
    b = dict(_flat(OmegaConf.to_container(compose_cfg([*args, "recipe=none"], tmp_path), resolve=False)))
    return {k: a.get(k, "<absent>") for k in sorted(a.keys() | b.keys()) if a.get(k, "<absent>") != b.get(k, "<absent>")}


def test_every_family_and_task_the_registry_supports_has_a_recorded_recipe():
    """Families recorded then kept every recipe; a family added since (the parallel recurrences of issue
    35) has no record, only the file check."""
    recorded = {(k.split()[0], v["recipe"]) for k, v in BEFORE.items()}
    then = {family for family, _ in recorded}
    tasks_then = {recipe.split("/")[0] for _, recipe in recorded}  # a task added since (mqar) has no record
    for model, data in pairs():
        task = task_of(OmegaConf.load(CONF / "data" / f"{data}.yaml"))
        assert model not in then or task not in tasks_then or (model, f"{task}/{model}") in recorded, \
            f"{model} x {data}: no {task}/{model}"
        assert (CONF / "recipe" / f"{recipe_file(f'{task}/{model}')}.yaml").is_file(), (model, task)


@pytest.mark.parametrize("pair", sorted(BEFORE))
def test_a_recipe_resolves_to_the_values_it_had_before(pair, tmp_path):
    model, data = pair.split()
    assert _recipe_effect([f"model={model}", f"data={data}"], tmp_path) == BEFORE[pair]


def test_the_base_familys_recipe_serves_a_family_without_its_own():
    assert recipe_file("classification/gru") == "classification/lstm"
    assert recipe_file("lm/rnn") == "lm/rnn"  # its own: a 10x smaller rate
    assert recipe_file("probe/transformer") == "probe/gpt"
    assert recipe_file("translation/vit") == "translation/vit"  # none: the model config's defaults apply


def test_the_probes_have_a_recipe_of_their_own():
    assert task_of(OmegaConf.load(CONF / "data" / "copy.yaml")) == "probe"
    assert task_of(OmegaConf.load(CONF / "data" / "sst2.yaml")) == "classification" == data_class(CONF, "sst2").task
    assert family_of(OmegaConf.create({"_target_": "seqbench.models.gpt.GPTModel"})) == "gpt"


@pytest.mark.parametrize("model,data,recipe,optimizer,lr,clip", [
    ("lstm", "sst2", "classification/lstm", "torch.optim.Adam", 1e-3, 5.0),
    ("gru", "conll2003", "tagging/gru", "torch.optim.Adam", 2e-3, 5.0),
    ("lstm", "multi30k", "translation/lstm", "torch.optim.Adam", 1e-3, 1.0),
    ("gru", "copy", "probe/gru", "torch.optim.Adam", 1e-2, 1.0),
    ("lstm", "mnist", "image/lstm", "torch.optim.Adam", 2e-3, 1.0),
    ("rnn", "ptb", "lm/rnn", "torch.optim.SGD", 2.0, 0.25),
    ("lstm", "ptb", "lm/lstm", "torch.optim.SGD", 20.0, 0.25),
    ("gpt", "ptb", "lm/gpt", "torch.optim.AdamW", 1e-3, 1.0),
    ("transformer", "multi30k", "translation/transformer", "torch.optim.AdamW", 7e-4, 1.0),
])
def test_model_and_data_alone_choose_the_recipe(model, data, recipe, optimizer, lr, clip, tmp_path):
    cfg = compose_cfg([f"model={model}", f"data={data}"], tmp_path)
    assert cfg.recipe == recipe
    assert (cfg.model.optimizer._target_, cfg.model.optimizer.lr) == (optimizer, pytest.approx(lr))
    assert cfg.trainer.gradient_clip_val == clip


def test_the_command_line_wins_over_the_recipe(tmp_path):
    cfg = compose_cfg(["model=lstm", "data=sst2", "model.optimizer.lr=5e-4", "trainer.max_epochs=2"], tmp_path)
    assert (cfg.model.optimizer.lr, cfg.trainer.max_epochs, cfg.recipe) == (5e-4, 2, "classification/lstm")
    # a group chosen by hand keeps its own values: SGD at its lr, not the recipe's Adam rate
    sgd = compose_cfg(["model=lstm", "data=sst2", "model/optimizer=sgd"], tmp_path)
    assert (sgd.model.optimizer._target_, sgd.model.optimizer.lr) == ("torch.optim.SGD", 20.0)
    off = compose_cfg(["model=lstm", "data=sst2", "recipe=none"], tmp_path)
    assert (off.recipe, off.model.optimizer._target_) == ("none", "torch.optim.SGD")
    chosen = compose_cfg(["model=lstm", "data=sst2", "recipe=tagging/lstm"], tmp_path)
    assert (chosen.recipe, chosen.model.optimizer.lr) == ("tagging/lstm", 2e-3)


def _presets() -> list[str]:
    out = [f"preset={p.parent.name}/{p.stem}" for p in sorted((CONF / "preset").glob("*/*.yaml"))
           if p.parent.name not in ("pretraining", "probe", "mqar")]  # those presets pick no data: their experiments do
    out += [f"experiment=long_range preset=probe/{p.stem}" for p in sorted((CONF / "preset" / "probe").glob("*.yaml"))]
    out += [f"experiment=mqar preset=mqar/{p.stem}" for p in sorted((CONF / "preset" / "mqar").glob("*.yaml"))]
    out += [f"experiment=pretraining preset=pretraining/{f} pretrained.bert=x pretrained.gpt=x"
            for f in ("bilstm", "bert", "gpt", "bert_pretrained", "gpt_reinit")]
    out += [f"experiment={p.stem}" for p in sorted((CONF / "experiment").glob("*.yaml"))
            if not _sweeps_presets(p)]  # a sweep over presets: its jobs are the presets above
    return out


def _sweeps_presets(path) -> bool:
    """Whether an experiment's sweep axes, its own or an included experiment's, hold `preset`."""
    node = OmegaConf.load(path)
    if "preset" in (OmegaConf.select(node, "hydra.sweeper.params") or {}):
        return True
    return any(isinstance(d, str) and d != "_self_" and _sweeps_presets(path.parent / f"{d}.yaml")
               for d in node.get("defaults", []))


# The keys a recipe may still fill under a preset: epochs the preset leaves unset. Each is on purpose:
# the Multi30k presets were always run for a number of epochs given on the command line (10 for the
# recorded Bahdanau run, which is the recipe's) and now default to their family's recipe.
ALLOWED = {"preset=multi30k/bahdanau": {"trainer.max_epochs"}, "preset=multi30k/luong": {"trainer.max_epochs"},
           "preset=multi30k/seq2seq": {"trainer.max_epochs"}, "preset=multi30k/t5": {"trainer.max_epochs"},
           "preset=multi30k/transformer_base": {"trainer.max_epochs"}}


# The comparisons' presets (issue 65) state no learning rate: a family's rate on a task is its recipe's, stated
# there once (conf/recipe/<task>/<family>.yaml), so the recipe fills it (and, for the Transformer, the paper's
# betas that go with it); tests/test_presets_unchanged.py holds the values they resolve to.
RATE = {"model.optimizer.lr", "model.optimizer.betas"}


def _allowed(preset: str) -> set[str]:
    from seqbench.presets.comparisons import COMPARISONS

    name = next((w for w in preset.split() if w.startswith("preset=")), "").removeprefix("preset=")
    return ALLOWED.get(preset, set()) | (RATE if name.rsplit("/", 1)[0] in COMPARISONS else set())


@pytest.mark.parametrize("preset", _presets())
def test_a_preset_keeps_its_own_recipe(preset, tmp_path):
    """Presets reproduce recorded runs: the recipe underneath changes none of their values but the rates the
    comparisons' presets take from it."""
    args = preset.split()
    with_recipe = OmegaConf.to_container(compose_cfg(args, tmp_path), resolve=False)
    without = OmegaConf.to_container(compose_cfg([*args, "recipe=none"], tmp_path), resolve=False)

    def flat(node, prefix=""):
        for k, v in node.items():
            if k == "hydra":
                continue
            yield from flat(v, f"{prefix}{k}.") if isinstance(v, dict) else [(f"{prefix}{k}", v)]

    a, b = dict(flat(with_recipe)), dict(flat(without))
    changed = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)} - {"recipe"}
    assert changed <= _allowed(preset), {k: (b.get(k), a.get(k)) for k in changed}


def test_the_run_saves_and_logs_its_recipe_and_its_saved_config_reproduces_it(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    r = run_cli(["model=gru", "data=sst2", "model.hidden_size=16", "debug=fast", "logger=csv"], tmp_path / "a")
    assert r.returncode == 0, r.stderr[-2000:]
    run = next((tmp_path / "a").glob("debug/runs/*"))
    saved = OmegaConf.load(run / ".hydra" / "config.yaml")
    assert saved.recipe == "classification/gru"
    assert (saved.model.optimizer._target_, saved.trainer.gradient_clip_val) == ("torch.optim.Adam", 5.0)
    assert saved.trainer.limit_train_batches == 5  # debug=fast is in the saved file too
    log = (run / "train.log").read_text()
    assert "recipe classification/gru (conf/recipe/classification/lstm.yaml, the lstm recipe)" in log
    # the saved file composes to the same run, and no second recipe is laid over it
    rerun = tmp_path / "b" / "run"
    again = run_cli(["--config-path", str(run / ".hydra"), "--config-name", "config", f"hydra.run.dir={rerun}"],
                    tmp_path / "b")
    assert again.returncode == 0, again.stderr[-2000:]
    resaved = OmegaConf.load(rerun / ".hydra" / "config.yaml")
    drop = lambda c: {k: v for k, v in OmegaConf.to_container(c).items() if k not in ("paths",)}  # noqa: E731
    assert drop(resaved) == drop(saved)
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (run, rerun))
    assert b["val/acc"] == a["val/acc"] and b["params"] == a["params"]  # same seed, same data, same steps
