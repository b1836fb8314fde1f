"""The final cells' commands (`python -m seqbench.protocol.final_cells`, seqbench.protocol.final_cells): each family's
size chosen per budget tier on one seed's selection loss, and the printed sweeps compose as written."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser

from conftest import compose_cfg
from seqbench.protocol import final_cells, tuning
from seqbench.training.tune import apply_tuning

PARAMS = {"s": 51_137, "m": 202_561, "l": 785_057}


def _job(root, n, family, metrics, overrides):
    job = root / str(n)
    (job / ".hydra").mkdir(parents=True)
    (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(
        {"hydra": {"runtime": {"choices": {"preset": f"frontier/shakespeare/{family}", "model": "x"}}}}))
    overrides = f"preset=frontier/shakespeare/{family} {overrides}"
    (job / "metrics.json").write_text(json.dumps({"status": "completed", "overrides": overrides, **metrics}))


def _search(tmp_path):
    """m @ 1e12: the LSTM's best trial is lr x2 at 512 tokens, GPT's lr x0.5 at 1024 (its diverged trial
    with the lowest loss is no candidate)."""
    root = tmp_path / "tune_frontier"
    trials = [("lstm", 2.0, 512, 1.40, "completed"), ("lstm", 1.0, 256, 1.50, "completed"),
              ("gpt", 0.5, 1024, 1.60, "completed"), ("gpt", 4.0, 256, 1.00, "failed")]
    for n, (family, lr, tokens, val, status) in enumerate(trials):
        _job(root, n, family, {"status": status, "tune/lr_scale": lr, "tune/tokens_per_step": tokens,
                               "budget/flops": 1e12, "params_non_embedding": PARAMS["m"], "val/loss_best": val,
                               "wall_time_s": 10.0}, f"size=m tune.lr_scale={lr} tune.tokens_per_step={tokens}")
    return root


def _sizes(tmp_path):
    """Seed 1234 of every size at two tiers. At 1e11 the LSTM's s has the lowest selection loss, its m the
    lowest test loss and its failed l a lower validation loss than both; at 1e12 its l is best, and that
    1.55 is also its lowest over both tiers."""
    root = tmp_path / "frontier_tuned_sizes"
    runs = [("lstm", 1e11, "s", 1.90, 2.50, "completed"), ("lstm", 1e11, "m", 1.95, 1.70, "completed"),
            ("lstm", 1e11, "l", 1.00, 1.00, "failed"),
            ("lstm", 1e12, "s", 1.80, 1.80, "completed"), ("lstm", 1e12, "m", 1.60, 1.60, "completed"),
            ("lstm", 1e12, "l", 1.55, 1.58, "completed"),
            ("gpt", 1e11, "s", 2.00, 2.10, "completed"), ("gpt", 1e11, "m", 2.10, 2.00, "completed"),
            ("gpt", 1e12, "s", 1.90, 1.90, "completed"), ("gpt", 1e12, "m", 1.70, 1.75, "completed"),
            ("gpt", 1e12, "l", 1.75, 1.65, "completed")]
    for n, (family, budget, size, val, test, status) in enumerate(runs):
        tuned = {"lstm": (2.0, 512), "gpt": (0.5, 1024)}[family]  # the search's setting: what the size runs train with
        _job(root, n, family, {"status": status, "tune/lr_scale": tuned[0], "tune/tokens_per_step": tuned[1],
                               "budget/flops": budget, "params_non_embedding": PARAMS[size], "val/loss_best": val,
                               "test/loss": test},
             f"size={size} budget.flops={budget:g} seed=1234 'tune.per_family={{lstm:{{lr_scale:2}}}}'")
    return root


def _parsed(line):
    """A printed command's sweep name and its overrides, as bash hands them to the launcher (quoting,
    brace expansion) and Hydra's own command-line parser reads them."""
    launcher = "bash scripts/sweep_background.sh "
    assert line.startswith(launcher)
    words = subprocess.run(["bash", "-c", "printf '%s\\0' " + line.removeprefix(launcher)], check=True,
                           capture_output=True, text=True).stdout.split("\0")[:-1]
    return words[0], {o.key_or_group: o for o in OverridesParser.create().parse_overrides(words[1:])}


def _commands(lines):
    return [_parsed(line) for line in lines if not line.startswith("#")]


def test_each_tier_runs_more_seeds_of_the_size_chosen_there_on_selection_loss(tmp_path, capsys):
    # bugs caught: the size chosen on the test loss (lstm m at 1e11), on the minimum over tiers (lstm l
    # at both), or from a failed run (lstm l at 1e11); a family's search setting lost on the way; the
    # per_family override left unquoted (bash brace-expands it into one family's key)
    lines = final_cells.main([str(_search(tmp_path)), "--sizes", str(_sizes(tmp_path))])
    assert capsys.readouterr().out.strip() == "\n".join(lines)
    commands = dict(_commands(lines))
    assert list(commands) == ["frontier_tuned_seeds_1e11", "frontier_tuned_seeds_1e12"]
    lstm, gpt = {"lr_scale": 2, "tokens_per_step": 512}, {"lr_scale": 0.5, "tokens_per_step": 1024}
    expected = {"1e11": {"lstm": {**lstm, "size": "s"}, "gpt": {**gpt, "size": "s"}},
                "1e12": {"lstm": {**lstm, "size": "l"}, "gpt": {**gpt, "size": "m"}}}
    for tier, per_family in expected.items():
        overrides = commands[f"frontier_tuned_seeds_{tier}"]
        assert overrides["tune.per_family"].value() == per_family
        assert overrides["budget.flops"].value() == float(tier)
        assert [str(v) for v in overrides["seed"].sweep_string_iterator()] == ["2", "3"]
        # only the families the search tuned: the others would run at the sweep's size, untuned
        assert list(overrides["preset"].sweep_string_iterator()) == ["frontier/shakespeare/lstm",
                                                                      "frontier/shakespeare/gpt"]
        assert {k: overrides[k].value() for k in ("test", "budget.evals", "tune.lr_scale", "tune.tokens_per_step")} \
            == {"test": True, "budget.evals": 10, "tune.lr_scale": 1, "tune.tokens_per_step": None}


def test_without_size_runs_it_prints_the_size_selection_sweep_and_the_old_table_still_works(tmp_path, capsys):
    # bugs caught: sizes or tiers not read from the presets and the frontier experiment, the first seed
    # not the config's, a size in per_family (it would override the swept size), `final` breaking the table
    search = _search(tmp_path)
    (name, overrides), = _commands(final_cells.main([str(search)]))
    assert name == "frontier_tuned_sizes"
    assert list(overrides["size"].sweep_string_iterator()) == ["s", "m", "l"]
    assert [float(b) for b in overrides["budget.flops"].sweep_string_iterator()] == [1e11, 1e12, 1e13]
    assert overrides["seed"].value() == 1234 and overrides["test"].value() is True
    assert overrides["tune.per_family"].value() == {"lstm": {"lr_scale": 2, "tokens_per_step": 512},
                                                     "gpt": {"lr_scale": 0.5, "tokens_per_step": 1024}}
    capsys.readouterr()
    rows = tuning.main([str(search)])
    assert "| lstm |" in capsys.readouterr().out and {r["family"] for r in rows} == {"lstm", "gpt"}


def _first_job(overrides, preset):
    """The overrides of the sweep's job for `preset`, each other sweep at its first value."""
    out = [f"preset={preset}"]
    for key, o in overrides.items():
        if key != "preset":
            out.append(f"{key}={next(iter(o.sweep_string_iterator()))}" if o.is_sweep_override() else o.input_line)
    return out


def test_the_printed_sweeps_compose_as_written_and_train_the_chosen_size(tmp_path):
    # bugs caught: a per_family rendering Hydra rejects or reads otherwise (a `=` inside, a key it drops), or
    # one the tuning does not read (the l-sized LSTM at 1e12, lr x2)
    lines = final_cells.main([str(_search(tmp_path)), "--sizes", str(_sizes(tmp_path))])
    _, overrides = dict(enumerate(_commands(lines)))[1]
    cfg = compose_cfg(_first_job(overrides, "frontier/shakespeare/lstm"), tmp_path)
    record = apply_tuning(cfg)
    assert (cfg.size, cfg.model.hidden_size, cfg.seed, cfg.budget.flops) == ("l", 221, 2, 1e12)
    assert record["tune/lr_scale"] == 2 and cfg.model.optimizer.lr == pytest.approx(2 * record["tune/recipe_lr"])
    (_, sizes), = _commands(final_cells.main([str(_search(tmp_path / "again"))]))
    cfg = compose_cfg(_first_job(sizes, "frontier/shakespeare/gpt"), tmp_path)
    assert apply_tuning(cfg)["tune/lr_scale"] == 0.5 and (cfg.size, cfg.seed) == ("s", 1234)
