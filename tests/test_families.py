"""The family registry (seqbench.families) is the one list of families, and the presets of the compared
families are matched in size, each with its own recipe.

A throwaway family registered here shows what adding one touches (issue 65): its layer and its registry
entry, both in this file, are enough for it to get its model config and its presets derived
(`python -m seqbench.presets --write`), to be a column of the matrix and a job of the comparisons' sweeps,
and to train.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import hydra
import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from conftest import CONF, ROOT, compose_cfg, model_config, run_cli
from seqbench.analysis.matrix import families, markdown, pairs
from seqbench.data.spec import TaskSpec
from seqbench.families import FAMILIES, Family, compared, family_of, order, presets, registered
from seqbench.models.parallel_recurrent import ParallelRecurrentModel
from seqbench.models.recurrent import RecurrentModel

CORPORA = {"ptb": 10_000, "shakespeare": 65, "enwik8": 256}


@pytest.mark.parametrize("corpus", CORPORA)
def test_presets_match_parameters_without_embeddings_within_one_percent(corpus, tmp_path):
    counts, recipes = {}, {}
    for family in compared():
        cfg = compose_cfg([f"preset={corpus}/{family}"], tmp_path)
        model = hydra.utils.instantiate(cfg.model, spec=TaskSpec("lm", vocab_size=CORPORA[corpus]))
        counts[family] = model.num_params(non_embedding=True)
        recipes[family] = (cfg.model.optimizer._target_.rsplit(".", 1)[-1], model.lm_batching)
    mean = sum(counts.values()) / len(counts)
    assert all(abs(n - mean) / mean < 0.01 for n in counts.values()), counts
    # recurrent nets, classic and parallel: BPTT streams; attention: windows; all but the classic RNNs: AdamW
    for family, (optimizer, batching) in recipes.items():
        recurrent = issubclass(FAMILIES[family].cls, (RecurrentModel, ParallelRecurrentModel))
        assert batching == ("stream" if recurrent else "windows"), (family, batching)
        assert FAMILIES[family].cls is RecurrentModel or optimizer == "AdamW", (family, optimizer)


# experiment -> (preset folder, variant presets after their family): every sweep over the compared families
SWEEPS = {"ptb_families": ("ptb", ()), "shakespeare_families": ("shakespeare", ()),
          "frontier": ("frontier/shakespeare", ()), "long_range": ("probe", ()),
          "tune_frontier": ("frontier/shakespeare", ()), "tune_frontier_ptb": ("frontier/ptb", ()),
          "frontier_enwik8": ("frontier/enwik8", ()), "tune_frontier_enwik8": ("frontier/enwik8", ()),
          "long_range_lr": ("probe", ()),
          "long_range_copy": ("probe", ("lstm_fb1",)), "long_range_recall": ("probe", ("lstm_fb1", "transformer_causal")),
          "mqar": ("mqar", ())}


# the committed records of the comparisons the compared families run in (the equal-budget search, the frontier
# after tuning, the long-range probes at tuned rates), with their family column
COMPARED_IN = ["tuning-search-ptb/trials.csv", "tuning-search-shakespeare/trials.csv",
               "frontier-after-tuning-ptb/runs.csv", "frontier-after-tuning-shakespeare/runs.csv",
               "long-range-tuned/long_range.csv"]


@pytest.mark.parametrize("record", COMPARED_IN)
def test_the_compared_families_are_those_the_committed_records_compare(record):
    """The registry's `compared` against what the runs compared, read from the records and not from the
    registry (every other test derives its list from `compared()`, so a family wrongly marked not compared
    drops out of the sweeps, the frontier and the findings with every test still passing)."""
    with (ROOT / "experiments" / "figures" / record).open(encoding="utf-8", newline="") as f:
        recorded = {row["family"] for row in csv.DictReader(f)}
    assert order(recorded) == compared(), (f"{record} compares {order(recorded)}; the registry marks "
                                           f"{compared()} compared")


@pytest.mark.parametrize("experiment", SWEEPS)
def test_the_sweeps_run_the_compared_families_presets(experiment, tmp_path):
    folder, variants = SWEEPS[experiment]
    swept = compose_cfg([f"experiment={experiment}"], tmp_path).hydra.sweeper.params["preset"].split(",")
    assert [p for p in swept if p.rsplit("/", 1)[1] not in variants] == [f"{folder}/{f}" for f in compared()]
    assert {f"{folder}/{v}" for v in variants} <= set(swept)
    assert all((CONF / "preset" / f"{p}.yaml").is_file() for p in swept), swept


@pytest.mark.slow
@pytest.mark.corpus("ptb")
def test_hydras_sweeper_launches_one_job_per_compared_family(tmp_path):
    """The `${families:ptb}` list as Hydra's own sweeper expands it (jobs built, not trained)."""
    # hydra/launcher=basic: the jobs in this process (the fresh process per job is tests/test_launcher.py's)
    out = run_cli(["-m", "experiment=ptb_families", "hydra/launcher=basic", "debug=fast", "logger=csv", "train=false",
                   "test=false"], tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    (sweep,) = (tmp_path / "debug" / "multiruns").iterdir()  # debug runs live apart: conf/debug/default.yaml
    jobs = [json.loads(line)["overrides"].split()[0] for line in (sweep / "jobs.jsonl").read_text().splitlines()]
    assert jobs == [f"preset=ptb/{f}" for f in compared()]


def test_variant_presets_follow_their_family_and_must_name_one():
    names = [p.split("/")[1] for p in presets("probe", "transformer_causal", "lstm_fb1").split(",")]
    assert names.index("lstm_fb1") == names.index("lstm") + 1
    assert names.index("transformer_causal") == names.index("transformer") + 1
    with pytest.raises(ValueError, match="mystery"):
        presets("probe", "mystery")


def test_each_family_is_its_model_config_and_each_model_config_a_registered_family():
    for name, fam in FAMILIES.items():  # the entry and conf/model/<name>.yaml agree
        assert family_of(model_config(name)) == name and model_config(name)._target_ == fam.module
    for path in sorted((CONF / "model").glob("*.yaml")):  # a size preset (gpt_nano) belongs to its family
        assert family_of(model_config(path.stem)) in FAMILIES, f"{path.name} is no registered family's config"


def test_tables_follow_the_registry_order_and_unknown_names_come_last():
    assert list(families()) == list(FAMILIES)
    assert order(["zeta", "gpt", "lstm_fb1", "lstm"]) == ["lstm", "gpt", "lstm_fb1", "zeta"]
    assert len({f.colour for f in FAMILIES.values()}) == len(FAMILIES)  # one colour each


class ToyMixer(nn.Module):
    """A throwaway family's layer, in this file as a user's would be in theirs: a running mean of a projection,
    its state (sum (B, d), count (B, 1)) carried across windows."""

    def __init__(self, d_model: int):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x, state=None):
        B, T, d = x.shape
        total, count = state if state is not None else (x.new_zeros(B, d), x.new_zeros(B, 1))
        sums = total[:, None] + self.proj(x).cumsum(1)  # (B, T, d)
        counts = count[:, None] + torch.arange(1, T + 1, device=x.device, dtype=x.dtype)[None, :, None]  # (B, T, 1)
        return sums / counts, (sums[:, -1], counts[:, -1])


# The registry entry a new family is (what src/seqbench/families.py would hold): its layer by import path in the
# mixer's backbone, sized as the parallel recurrences are, trained by their recipes (base mingru)
TOY = Family("toy", "seqbench.models.mixer.MixerModel", "olive", base="mingru", kind="recurrent", compared=True,
             selector={"mixer": f"{__name__}:ToyMixer"}, extends="mixer", width=("d_model",), depth="num_layers",
             tiny=("model.d_model=8",))


def test_a_family_from_one_file_gets_its_config_presets_matrix_column_sweeps_and_trains(tmp_path):
    """Adding a family is its layer, its registry entry and its test (this file): the rest is derived."""
    from seqbench.compose import compose_final
    from seqbench.presets.derive import derive_all
    from seqbench.training.run import build, make_trainer

    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    before = {p.relative_to(conf) for p in conf.rglob("*.yaml")}
    with registered(TOY):
        derived = derive_all(conf, ["probe"], ["toy"], write=True)
        written = {p.relative_to(conf) for p in conf.rglob("*.yaml")} - before
        assert written == {Path("model/toy.yaml"), Path("preset/probe/toy.yaml")}, written
        (_, _, _), (d, _, _) = derived
        assert d.chosen[""].within and d.chosen[""].target == 76_042  # the LSTM's count at 128 units on copy
        assert "`toy`" in markdown().splitlines()[0] and ("toy", "copy") in pairs() and ("toy", "ptb") in pairs()
        assert presets("probe").split(",")[-1] == "probe/toy"  # the sweeps' lists: ${families:probe}
        cfg = compose_final(["experiment=long_range", "preset=probe/toy", "logger=csv", "trainer=cpu", "trainer.max_steps=1",
                             "trainer.limit_val_batches=1", "trainer.enable_progress_bar=false", "~callbacks.progress_bar",
                             "~callbacks.model_summary", "~callbacks.step_checkpoint", "data.T=6", "data.batch_size=16",
                             "data.train_size=32", "data.eval_batch_size=32", "data.val_size=32", "data.test_size=32"],
                            conf_dir=conf)
        assert family_of(cfg.model) == "toy" and cfg.recipe == "probe/toy"  # served by probe/lstm, through mingru
        assert cfg.model.optimizer._target_ == "torch.optim.Adam" and cfg.model.optimizer.lr == 1e-2
        datamodule, model = build(cfg)
        assert isinstance(model.layers()[0].inner, ToyMixer)
        assert model.num_params(non_embedding=True) == d.chosen[""].count
        trainer = make_trainer(cfg)
        trainer.fit(model, datamodule=datamodule)
        assert trainer.global_step == 1


def test_a_family_registers_once():
    with pytest.raises(ValueError, match="already registered"):
        with registered(Family("lstm", FAMILIES["lstm"].module, "C0")):
            pass


def test_every_family_with_a_flops_formula_declares_the_kind_the_formula_implies():
    # the findings read a family's side from `kind`; a parallel recurrence declared "attention" (or a new
    # attention family left without a kind) would move it across the headline's comparison unseen
    from seqbench.nn.flops import attention_forward_flops

    for family in FAMILIES.values():
        if family.flops is not None:
            assert family.kind == ("attention" if family.flops is attention_forward_flops else "recurrent"), family.name
    assert all(FAMILIES[name].kind for name in compared())
    assert FAMILIES["t5"].kind == "attention" and FAMILIES["hmm"].kind is None


def test_a_language_model_family_without_a_kind_is_refused_at_declaration():
    # bug caught: a family added with a FLOPs formula and no kind would sit on neither side of the findings'
    # "best attention / best recurrent" and drop out of the headline unseen
    from seqbench.nn.flops import recurrent_forward_flops

    with pytest.raises(ValueError, match="has a FLOPs formula but no kind"):
        Family("newnet", "pkg.NewNet", "black", flops=recurrent_forward_flops)
    with pytest.raises(ValueError, match="kind 'attn' is neither"):
        Family("newnet", "pkg.NewNet", "black", kind="attn")


def test_family_of_reads_whatever_names_a_run(tmp_path):
    # bugs caught: a variant preset (`lstm_fb1`), a benchmark's `name:overrides` or a preset path read as a family
    # of its own (the findings would leave it out of "best recurrent"); a run read by its preset's name where
    # its saved model config says otherwise (`multi30k/bahdanau` trains the GRU); a run without a saved config
    # (a W&B run) not read at all
    from seqbench.training.record import Run

    assert family_of("ptb/lstm_fb1") == family_of("lstm_fb1") == family_of(OmegaConf.create(model_config("lstm"))) == "lstm"
    assert family_of("frontier/ptb/gpt") == family_of("shakespeare/gpt:d_model=221:num_layers=2") == "gpt"
    assert family_of("transformer_causal") == "transformer" and family_of("bahdanau") == "bahdanau"
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text("model: {_target_: seqbench.models.recurrent.RecurrentModel, cell: gru}\n")
    (tmp_path / ".hydra" / "hydra.yaml").write_text("hydra: {runtime: {choices: {preset: multi30k/bahdanau}}}\n")
    run = Run.at(tmp_path)
    assert run.family == "bahdanau" and family_of(run) == "gru" and family_of(Run("r", "mingru_fb1", {})) == "mingru"
