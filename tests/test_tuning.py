"""The equal-budget tuning protocol (seqbench.protocol.tuning, experiment=tune_frontier / tune_frontier_ptb):
the same grid and schedule rule for every compared family, applied on top of each family's recipe."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from conftest import compose_cfg
from seqbench.data.spec import TaskSpec
from seqbench.errors import ConfigError
from seqbench.families import compared
from seqbench.training.record import Run
from seqbench.training.run import instantiate
from seqbench.protocol.tuning import per_family, summary
from seqbench.training.tune import apply_tokens_per_step, apply_tuning

CORPORA = {"tune_frontier": ("shakespeare", "seqbench.data.shakespeare.ShakespeareCharDataModule", 65),
           "tune_frontier_ptb": ("ptb", "seqbench.data.ptb.PTBDataModule", 10_000)}


def _compose(experiment, family, tmp_path, *extra):
    corpus = CORPORA[experiment][0]
    return compose_cfg([f"experiment={experiment}", f"preset=frontier/{corpus}/{family}", "logger=csv", *extra],
                       tmp_path)


@pytest.mark.parametrize("experiment", CORPORA)
def test_every_family_gets_the_same_grid(experiment, tmp_path):
    params = compose_cfg([f"experiment={experiment}"], tmp_path).hydra.sweeper.params
    corpus = CORPORA[experiment][0]
    assert params["preset"].split(",") == [f"frontier/{corpus}/{f}" for f in compared()]
    grid = {k: str(v).split(",") for k, v in params.items() if k.startswith("tune.")}
    # learning rate and tokens per step, both searched, the same trials for every family
    assert set(grid) == {"tune.lr_scale", "tune.tokens_per_step"} and all(len(v) >= 3 for v in grid.values())


@pytest.mark.parametrize("experiment", CORPORA)
def test_the_rate_is_scaled_and_ends_at_the_budget_for_every_family(experiment, tmp_path):
    for family in compared():
        recipe = _compose(experiment, family, tmp_path, "tune=null")
        cfg = _compose(experiment, family, tmp_path, "tune.lr_scale=4")
        record = apply_tuning(cfg)
        assert cfg.model.optimizer.lr == pytest.approx(4 * recipe.model.optimizer.lr), family
        assert record["tune/recipe_lr"] == pytest.approx(recipe.model.optimizer.lr)
        # one schedule for all: stepped every batch, its length read from max_steps (the budget)
        assert cfg.model.scheduler._target_ == "seqbench.optim.warmup_cosine", family
        assert cfg.model.scheduler.get("total_steps") is None and cfg.model.scheduler_interval == "step", family
        assert "start_epoch" not in cfg.model.scheduler  # nothing of a recipe's own schedule is left


def test_ptb_recurrent_recipes_lose_their_per_epoch_decay(tmp_path):
    recipe = _compose("tune_frontier_ptb", "lstm", tmp_path, "tune=null")
    assert recipe.model.scheduler._target_ == "seqbench.optim.step_decay"  # what the tuning replaces


@pytest.mark.parametrize("experiment", CORPORA)
def test_tokens_per_step_are_streams_or_windows_of_the_same_tokens(experiment, tmp_path):
    corpus, datamodule, vocab = CORPORA[experiment]
    for family in compared():
        cfg = _compose(experiment, family, tmp_path, "tune.tokens_per_step=512", "size=s")
        apply_tuning(cfg)
        model = instantiate(cfg.model, "model", spec=TaskSpec("lm", vocab_size=vocab))
        dm = instantiate(OmegaConf.merge(cfg.data, {"_target_": datamodule}), "data")
        record = apply_tokens_per_step(cfg, model, dm)
        length = model.context if getattr(model, "lm_batching", "stream") == "windows" else cfg.data.bptt
        assert dm.batch_size == round(512 / length) == cfg.data.batch_size, family
        assert dm.train_batch_shape(model) == (dm.batch_size, length)
        assert record["tune/tokens_per_step"] == dm.batch_size * length
        assert abs(record["tune/tokens_per_step"] - 512) <= length / 2


def test_a_family_s_tuned_setting_applies_to_it_alone_and_may_not_meet_a_swept_value(tmp_path):
    cfg = _compose("tune_frontier", "lstm", tmp_path, "tune.lr_scale=1", "+tune.per_family.lstm.lr_scale=2")
    base = _compose("tune_frontier", "lstm", tmp_path, "tune=null").model.optimizer.lr
    apply_tuning(cfg)
    assert cfg.model.optimizer.lr == pytest.approx(2 * base)
    # bug caught: per_family silently winning over a swept tune.lr_scale, so that a sweep over the grid
    # (the experiment's own, when the command leaves it) trains the same run once per grid value
    for clash in ("tune.lr_scale=0.5", "tune.tokens_per_step=512"):
        both = _compose("tune_frontier", "lstm", tmp_path, clash,
                        "+tune.per_family.lstm={lr_scale:2,tokens_per_step:256}")
        with pytest.raises(ConfigError, match="per_family wins"):
            apply_tuning(both)
    gpt = _compose("tune_frontier", "gpt", tmp_path, "tune.lr_scale=0.5", "+tune.per_family.lstm.lr_scale=2")
    gpt_base = _compose("tune_frontier", "gpt", tmp_path, "tune=null").model.optimizer.lr
    apply_tuning(gpt)
    assert gpt.model.optimizer.lr == pytest.approx(0.5 * gpt_base)


def test_the_search_summary_counts_trials_and_cost_and_picks_on_selection(tmp_path):
    def trial(family, lr, tokens, val, wall, status="completed", test=None):
        m = {"status": status, "params_non_embedding": 1000, "budget/flops": 1e12, "val/loss_best": val,
             "tune/lr_scale": lr, "tune/tokens_per_step": tokens, "wall_time_s": wall}
        if test is not None:
            m["test/loss"] = test
        return Run(f"{family}-{lr}-{tokens}", family, m)

    runs = [trial("lstm", 1, 512, 1.50, 30.0), trial("lstm", 2, 512, 1.40, 31.0, test=9.0),
            trial("lstm", 4, 512, 1.30, 12.0, status="failed"),  # diverged: not a candidate, still a trial
            trial("gpt", 1, 256, 1.60, 50.0, test=1.0), trial("gpt", 2, 256, 1.70, 52.0)]
    rows = {r["family"]: r for r in summary(runs)}
    assert [r["family"] for r in summary(runs)] == ["lstm", "gpt"]  # the registry's order
    assert (rows["lstm"]["trials"], rows["lstm"]["failed"], rows["lstm"]["wall_time_s"]) == (3, 1, 73.0)
    assert rows["lstm"]["best"] == {"lr_scale": 2, "tokens_per_step": 512}  # on validation, not on test
    assert rows["gpt"]["best"] == {"lr_scale": 1, "tokens_per_step": 256}
    assert per_family(list(rows.values())) == {"lstm": {"lr_scale": 2, "tokens_per_step": 512},
                                                "gpt": {"lr_scale": 1, "tokens_per_step": 256}}


def test_a_family_s_chosen_size_builds_that_size_and_a_bad_one_fails_first(tmp_path):
    # bug caught: per_family's size ignored, or applied after the dimensions were resolved (m's 112 units)
    cfg = _compose("tune_frontier", "lstm", tmp_path, "tune.per_family={lstm:{size:l}}")
    record = apply_tuning(cfg)
    model = instantiate(cfg.model, "model", spec=TaskSpec("lm", vocab_size=65))
    assert model.hparams.hidden_size == 221 == cfg.sizes.l.hidden and record["tune/size"] == "l"
    other = _compose("tune_frontier", "gpt", tmp_path, "tune.per_family={lstm:{size:l}}")
    assert apply_tuning(other)["tune/size"] == "m"  # another family's entry leaves the sweep's size
    bad = _compose("tune_frontier", "lstm", tmp_path, "tune.per_family={lstm:{size:xl}}")
    with pytest.raises(ConfigError, match=r"size=xl is not one of this preset's sizes: xxs, xs, s, m, l\."):
        apply_tuning(bad)
