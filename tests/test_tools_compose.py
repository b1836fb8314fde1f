"""The analysis tools build the model `src/train.py` builds: each composes through `seqbench.compose`
(Hydra, then the recipe of the data's task), so a benchmark or a probe measures the network a run
trains. Each tool's model is compared with the one instantiated from the config `src/train.py` would
run (`conftest.compose_cfg`): the same hyperparameters and the same parameter count."""

from __future__ import annotations

import pytest

from conftest import compose_cfg
from seqbench.analysis import bench, decode_bench, gradient_flow, image_step_time
from seqbench.data.spec import TaskSpec
from seqbench.families import compared, presets
from seqbench.training.run import instantiate


def assert_same_model(tool, reference):
    assert dict(tool.hparams) == dict(reference.hparams)  # every constructor argument but spec and optimizer
    assert tool.num_params() == reference.num_params()


def trained(args: list[str], spec: TaskSpec, tmp_path, **model_keys):
    cfg = compose_cfg(args, tmp_path)
    for key, value in model_keys.items():
        cfg.model[key] = value
    return instantiate(cfg.model, "model", spec=spec)


@pytest.mark.parametrize("preset", presets("ptb").split(","))
def test_the_benchmark_builds_the_presets_model(preset, tmp_path):
    tool = bench.build_model(preset, vocab=100, length=64)
    context = {"context": 64} if "context" in tool.hparams else {}
    assert_same_model(tool, trained([f"preset={preset}"], TaskSpec("lm", vocab_size=100), tmp_path, **context))


@pytest.mark.parametrize("family", decode_bench.cached_families())
def test_the_decoding_benchmark_builds_what_a_run_on_its_task_trains(family, tmp_path):
    tool = decode_bench.build_model(family, vocab=100)
    data = "multi30k" if decode_bench.translates(family) else "ptb"
    assert_same_model(tool, trained([f"model={family}", f"data={data}"], tool.spec, tmp_path))


@pytest.mark.parametrize("family", compared())
def test_the_gradient_probe_builds_the_long_range_jobs_model(family, tmp_path):
    datamodule, tool = gradient_flow.build_family(family, T=6)
    args = ["experiment=long_range", f"preset=probe/{family}", "data.T=6", "seed=0"]
    assert_same_model(tool, trained(args, datamodule.spec, tmp_path))


def test_the_image_step_timer_composes_the_presets_run(tmp_path):
    tool = image_step_time.compose("mnist/cnn", ["model.hidden=16"])
    run = compose_cfg(["preset=mnist/cnn", "model.hidden=16"], tmp_path)
    assert tool.model == run.model and tool.recipe == run.recipe == "image/cnn"
