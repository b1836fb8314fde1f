"""Context usage (seqbench.analysis.context_usage): what each reading of a model really gives it.

Tiny untrained models on a small character corpus: the properties hold for any weights.
"""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from conftest import TINY
from seqbench.analysis import context_usage as cu
from seqbench.families import FAMILIES
from seqbench.models.parallel_recurrent import ParallelRecurrentModel
from seqbench.training.run import build

# the compared families that carry a state across windows (the classic RNNs, the parallel recurrences)
STATEFUL = [name for name, family in FAMILIES.items() if family.compared and family.cls.lm_batching == "stream"]
TINY_GPT = [*TINY, "model=gpt", "model.n_layer=1", "model.n_head=2", "model.d_model=16"]


@pytest.fixture
def corpus(tmp_path):
    """Three splits of made-up text: varied enough that context changes the prediction."""
    rng = random.Random(0)
    words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "off", "to", "sea"]

    def text(n_lines: int) -> str:
        return "\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) for _ in range(n_lines)) + "\n"

    files = {}
    for split, n in (("train", 60), ("valid", 10), ("test", 12)):
        files[split] = tmp_path / f"{split}.txt"
        files[split].write_text(text(n))
    return ["data=text", f"data.train_file={files['train']}", f"data.valid_file={files['valid']}",
            f"data.test_file={files['test']}", "data.level=char", "data.eval_batch_size=1"]


@pytest.mark.parametrize("family", STATEFUL)
def test_a_recurrent_model_with_the_whole_split_before_each_target_scores_the_ordinary_test_loss(family, corpus,
                                                                                                 cfg_factory):
    torch.manual_seed(0)
    dm, model = build(cfg_factory([*TINY, f"model={family}", *FAMILIES[family].tiny, *corpus], tiny=False))
    model.eval()
    stream = dm.streams["test"]
    everything = torch.arange(1, stream.numel())  # every target of the split
    full = cu.full_context_losses(model, stream, everything)
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        accelerator="cpu")
    ordinary = trainer.test(model, datamodule=dm, verbose=False)[0]["test/loss"]
    assert math.isclose(full.mean().item(), ordinary, rel_tol=1e-5)
    # reading the k = p tokens before a target from a zero state is the same as the carried state
    some = everything[[40, 100, 200]]
    sparse = cu.full_context_losses(model, stream, some, chunk=7)  # gaps read in chunks: the state carries
    assert torch.allclose(sparse, full[some - 1], atol=1e-5)
    for p in some.tolist():
        alone = cu.read_losses(model, stream, torch.tensor([p]), p)
        assert torch.allclose(alone, full[p - 1 : p], atol=1e-5)
    # and a shorter read is a different number (the model does use what came before)
    assert not torch.allclose(cu.read_losses(model, stream, some, 2), full[some - 1], atol=1e-4)


@pytest.fixture
def gpt(corpus, cfg_factory):
    torch.manual_seed(0)
    dm, model = build(cfg_factory([*TINY_GPT, "model.context=8", *corpus], tiny=False))
    return dm, model.eval()


def test_a_model_that_sees_n_tokens_gives_a_flat_curve_beyond_n(gpt):
    dm, model = gpt
    stream = dm.streams["test"]
    positions = cu.sample_targets(stream.numel(), 30, need=24, seed=1)
    beyond = [cu.read_losses(model, stream, positions, k, batch_tokens=64) for k in (8, 12, 24)]
    for losses in beyond[1:]:
        assert torch.allclose(losses, beyond[0], atol=1e-6)
    assert torch.allclose(cu.full_context_losses(model, stream, positions), beyond[0], atol=1e-6)
    within = cu.read_losses(model, stream, positions, 2)
    assert (within - beyond[0]).abs().max() > 1e-4  # below n the reads differ


def test_perturbing_tokens_beyond_the_context_changes_nothing(gpt):
    dm, model = gpt
    stream = dm.streams["test"]
    positions = cu.sample_targets(stream.numel(), 30, need=20, seed=2)
    intact = cu.read_losses(model, stream, positions, 20)
    unigram = torch.bincount(dm.streams["train"], minlength=model.spec.vocab_size).double()
    for perturb in (cu.shuffle_far(8, torch.Generator().manual_seed(0)),
                    cu.replace_far(8, unigram, torch.Generator().manual_seed(0))):
        assert torch.equal(cu.read_losses(model, stream, positions, 20, perturb=perturb), intact)
    nearer = cu.read_losses(model, stream, positions, 20, perturb=cu.shuffle_far(3, torch.Generator().manual_seed(0)))
    assert (nearer - intact).abs().max() > 1e-4


def test_shuffling_keeps_the_near_tokens_and_the_far_multiset_and_replacing_draws_from_the_unigram():
    x = torch.arange(40).view(2, 20)
    shuffled = cu.shuffle_far(5, torch.Generator().manual_seed(0))(x)
    assert torch.equal(shuffled[:, 15:], x[:, 15:])
    assert torch.equal(shuffled[:, :15].sort(dim=1).values, x[:, :15])
    assert not torch.equal(shuffled, x)
    unigram = torch.zeros(50, dtype=torch.double)
    unigram[[45, 46]] = 1.0
    replaced = cu.replace_far(5, unigram, torch.Generator().manual_seed(0))(x)
    assert torch.equal(replaced[:, 15:], x[:, 15:])
    assert set(replaced[:, :15].flatten().tolist()) <= {45, 46}


class BagOfWords(torch.nn.Module):
    """A hand-made attention-style LM: its logits count each token in the last `context` tokens read
    (logit = half the count), so its output depends on which tokens sit at distances 1..context before
    the target and not on their order. Shuffling the far tokens therefore changes no loss at all, and
    replacing them by a split made of one token changes every loss to a number computable by hand."""

    lm_batching = "windows"

    def __init__(self, vocab_size: int, context: int) -> None:
        super().__init__()
        self.context, self.spec, self.device = context, SimpleNamespace(vocab_size=vocab_size), torch.device("cpu")

    def next_token_logits(self, x: torch.Tensor) -> torch.Tensor:  # (B, L) -> (B, V)
        return 0.5 * F.one_hot(x[:, -self.context :], self.spec.vocab_size).sum(1).float()


def test_shuffle_keeps_a_bag_of_words_loss_and_replace_draws_from_the_training_split():
    V, prefix, ds = 8, 12, [2, 5]
    g = torch.Generator().manual_seed(0)
    streams = {"train": torch.zeros(500, dtype=torch.long),  # the training split: token 0 only
               "test": torch.randint(1, V, (300,), generator=g)}  # never 0
    lm = cu.LM("bag", "bag", "toy", BagOfWords(V, context=16), SimpleNamespace(streams=streams))
    positions = cu.sample_targets(300, 40, need=16, seed=0)
    r = cu.measure(lm, "test", positions, ks=[1, 4], prefix=prefix, ds=ds, seed=0, batch_tokens=64)

    def by_hand(d: int | None) -> float:
        """Mean loss with the tokens farther than d replaced by 0 (d=None: intact), the formula written out."""
        losses = []
        for p in positions.tolist():
            window = streams["test"][p - prefix : p].clone()
            if d is not None:
                window[: prefix - d] = 0
            logits = 0.5 * torch.bincount(window, minlength=V).float()
            losses.append(-torch.log_softmax(logits, 0)[streams["test"][p]])
        return torch.stack(losses).mean().item()

    assert r["intact"] == pytest.approx(by_hand(None), rel=1e-6)
    assert [(row["d"], row["delta"]) for row in r["perturbed"]["shuffle"]] == [(d, 0.0) for d in ds]  # order unused
    for row, d in zip(r["perturbed"]["replace"], ds):
        assert row["loss"] == pytest.approx(by_hand(d), rel=1e-6), (d, row["loss"], by_hand(d))
        assert row["delta"] > 0.5  # token 0 now dominates the count: a different, known answer
    assert r["order_range"] == ds[0] and r["identity_range"] is None


def test_targets_are_seeded_and_far_enough_and_effective_context_is_the_first_k_within_one_percent():
    a, b = cu.sample_targets(1000, 50, need=300, seed=3), cu.sample_targets(1000, 50, need=300, seed=3)
    assert torch.equal(a, b) and int(a.min()) >= 300 and len(set(a.tolist())) == 50
    assert not torch.equal(a, cu.sample_targets(1000, 50, need=300, seed=4))
    stream = torch.arange(1000)
    assert torch.equal(cu.windows(stream, torch.tensor([300, 512]), 3), torch.tensor([[297, 298, 299], [509, 510, 511]]))
    curve = [(1, 6.0), (10, 5.2), (100, 5.04), (200, 5.0)]
    assert cu.effective_context(curve, full=5.0) == 100
    assert cu.effective_context(curve, full=4.0) is None


def _save_run(cfg, model, run_dir):
    (run_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    (run_dir / "checkpoints").mkdir()
    torch.save({"state_dict": model.state_dict()}, run_dir / "checkpoints" / "last.ckpt")


def test_the_command_measures_every_family_on_the_same_targets(corpus, cfg_factory, tmp_path):
    torch.manual_seed(0)
    runs = []
    for name, args, tiny in (("lstm", ["model=lstm"], True), ("gpt", [*TINY_GPT, "model.context=16"], False)):
        cfg = cfg_factory([*args, *corpus], tiny=tiny)
        _, model = build(cfg)
        _save_run(cfg, model, tmp_path / name)
        runs.append(tmp_path / name)
    out = tmp_path / "out"
    results = cu.main([str(runs[0]), str(runs[1] / "checkpoints" / "last.ckpt"), "--out", str(out), "--targets", "15",
                       "--ks", "1", "4", "32", "--prefix", "24", "--ds", "2", "8"])
    assert set(results) == {"lstm", "gpt"}
    rows = list(csv.DictReader(open(out / "context_usage.csv")))
    assert {r["family"] for r in rows} == {"lstm", "gpt"} and {r["targets"] for r in rows} == {"15"}
    gpt_ks = [int(r["x"]) for r in rows if r["family"] == "gpt" and r["measure"] == "prefix"]
    assert gpt_ks == [1, 4, 16]  # k up to the trained context, which is the full context
    lstm_ks = [int(r["x"]) for r in rows if r["family"] == "lstm" and r["measure"] == "prefix"]
    assert lstm_ks == [1, 4, 32]
    assert (out / "context_text.png").is_file()
    assert "| text | lstm |" in (out / "context_usage.md").read_text()
    # bug caught: the table without each model's training window (a 64- and a 256-token GPT look alike)
    assert "| text | gpt | gpt | 16 |" in (out / "context_usage.md").read_text()


def test_a_sweep_s_job_is_named_with_its_sweep():
    """Bug caught: runs named by their job folder alone, so job 0 of two sweeps (the Transformer at 64
    and at 256 tokens) were two rows called "0"."""
    assert cu.run_label(Path("outputs/sweeps/context256_ptb/0")) == "context256_ptb/0"
    assert cu.run_label(Path("outputs/runs/lstm")) == "lstm"


def test_paths_that_hold_no_run_end_in_one_sentence(tmp_path):
    with pytest.raises(cu.UserError, match="does not exist"):
        cu.expand([tmp_path / "nowhere"])
    with pytest.raises(cu.UserError, match="holds no run"):
        cu.expand([tmp_path])
    (tmp_path / "run" / ".hydra").mkdir(parents=True)
    (tmp_path / "run" / ".hydra" / "config.yaml").write_text("{}\n")
    with pytest.raises(cu.UserError, match="holds no best-"):
        cu.expand([tmp_path / "run"])
    stray = tmp_path / "model.ckpt"
    stray.write_bytes(b"")
    with pytest.raises(cu.UserError, match="checkpoints/ folder of the run"):
        cu.expand([stray])


@pytest.mark.parametrize("family", [n for n, f in FAMILIES.items() if f.cls is ParallelRecurrentModel])
def test_the_command_measures_a_parallel_recurrence_under_its_registry_name(family, corpus, cfg_factory, tmp_path):
    """A run directory named otherwise and without Hydra's choices: the name comes from the model config
    through the registry (seqbench.families.family_of), not from the directory or a `cell` key."""
    torch.manual_seed(0)
    cfg = cfg_factory([*TINY, f"model={family}", *FAMILIES[family].tiny, *corpus], tiny=False)
    _, model = build(cfg)
    _save_run(cfg, model, tmp_path / "run")
    cu.main([str(tmp_path / "run"), "--out", str(tmp_path / "out"), "--targets", "6", "--ks", "1", "8", "--prefix",
             "12", "--ds", "2", "4"])
    rows = list(csv.DictReader(open(tmp_path / "out" / "context_usage.csv")))
    assert {r["family"] for r in rows} == {family}
    assert [int(r["x"]) for r in rows if r["measure"] == "prefix"] == [1, 8]  # no context limit: every k


class PrefixRecorder(torch.nn.Module):
    """A stand-in LM that records every read it is given and predicts uniformly; `context` None: a
    recurrent model (it carries a state in the full-context pass), else an attention model."""

    def __init__(self, vocab_size: int, context: int | None) -> None:
        super().__init__()
        self.lm_batching = "stream" if context is None else "windows"
        self.context, self.spec, self.device = context, SimpleNamespace(vocab_size=vocab_size), torch.device("cpu")
        self.reads = []

    def next_token_logits(self, x: torch.Tensor) -> torch.Tensor:  # (B, L) -> (B, V)
        self.reads.append(x.clone())
        return torch.zeros(x.size(0), self.spec.vocab_size)

    def read_on(self, x: torch.Tensor, state=None):
        return torch.zeros(x.size(0), self.spec.vocab_size), state


def test_the_perturbations_sit_at_the_same_absolute_distances_for_every_family():
    """Khandelwal's shuffle and replace keep the d tokens nearest the target and change those farther
    than d — the same d, on the same prefix, with the same draws, whatever the family: an attention
    model is given the whole perturbed prefix and reads its last `context` tokens of it (a d beyond its
    window leaves what it reads intact), never a prefix cut to its window first, where "d" would count
    from another origin or some d would be left out."""
    V, prefix, ds = 9, 20, [2, 5, 10]  # d = 10 lies beyond the attention model's 6-token window
    stream = torch.randint(0, V, (400,), generator=torch.Generator().manual_seed(0))
    data = SimpleNamespace(streams={"train": stream, "test": stream})
    positions = cu.sample_targets(400, 25, need=prefix, seed=0)
    models = {"attention": PrefixRecorder(V, context=6), "recurrent": PrefixRecorder(V, context=None)}
    for name, model in models.items():
        r = cu.measure(cu.LM(name, name, "toy", model, data), "test", positions, ks=[1, 3], prefix=prefix, ds=ds,
                       seed=0, batch_tokens=10_000)
        assert [row["d"] for row in r["perturbed"]["shuffle"]] == ds == [row["d"] for row in r["perturbed"]["replace"]]
    intact = cu.windows(stream, positions, prefix)
    reads = {name: [x for x in model.reads if x.size(1) == prefix] for name, model in models.items()}
    for name, prefix_reads in reads.items():
        assert len(prefix_reads) == 1 + 2 * len(ds), name  # the intact prefix, then shuffle and replace per d
        assert torch.equal(prefix_reads[0], intact)
        for j, d in enumerate(ds):
            for x in prefix_reads[1 + 2 * j : 3 + 2 * j]:
                kept = (x == intact).all(0)  # (prefix,) columns left as they were in every row
                assert kept[prefix - d :].all() and not kept[prefix - d - 1], (name, d)
    for a, b in zip(reads["attention"], reads["recurrent"]):
        assert torch.equal(a, b)  # the same perturbed prefixes, draw for draw
