"""How much context a trained language model uses on real text (Khandelwal et al. 2018, "Sharp Nearby,
Fuzzy Far Away"), for every family on one fixed, seeded sample of target positions.

    python -m seqbench.analysis.context_usage <run dirs, sweep dirs or .ckpt files> [--out DIR]
        [--split test] [--targets 2000] [--seed 0] [--ks 1 2 5 ... 1000] [--prefix 300] [--ds 1 2 5 ...]

A target is a token at position p of the split (the stream of token ids); it is predicted from
tokens before p. Three measurements, each on the same targets for every run on a corpus:

* **Loss against context length k.** The model reads exactly the k tokens before p, stream[p-k:p]:
  a recurrent model from a zero state, an attention model as a window of k tokens (k up to its
  trained context). Effective context: the smallest k whose mean loss is within 1 % of the
  full-context loss (Khandelwal's definition).
* **Full context.** A recurrent model carries its state through the whole split from its first token
  (one pass, one column: the ordinary evaluation with `data.eval_batch_size=1`), and the loss is read
  at the sampled positions. An attention model reads its trained context, the `context` tokens
  before p (the sliding-window evaluation gives a token between context - stride and context).
* **Perturbation.** The model reads a fixed prefix of `prefix` tokens ending at p (an attention model
  the last `context` of them, as it was trained to); the tokens farther than d from p,
  stream[p-prefix : p-d], are *shuffled* among themselves (order destroyed, word identities kept) or
  *replaced* by tokens drawn independently from the training split's unigram distribution (both
  destroyed); the d tokens nearest p are left intact. Reported: the mean loss increase over the intact
  prefix, against d.

    stream   ... | x x x x x x x x x x x x x | y y y y y | t
                  p-prefix                    p-d         p    (x: shuffled / replaced; y: intact)

Targets are drawn uniformly (seeded, without replacement) from the positions p >= need, where need is
the longest read of any run on the corpus (largest k, the prefix, the largest context), so every
measurement of every run sees the same targets with a full-length read. Each mean comes with the
standard error of its paired difference (the same targets with and without the change).

Writes `context_usage.csv` (every number), `context_<corpus>.png` (loss against k, and loss increase
against d, every family) and `context_usage.md` (the table of effective context) to `--out`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from seqbench.analysis.context_usage_page import plot_corpus, table, write_csv
from seqbench.checkpoints import check_checkpoint, load_weights
from seqbench.entry import register_resolvers, run_command
from seqbench.errors import UserError
from seqbench.families import family_of
from seqbench.provenance import command_line, write_record
from seqbench.training.record import read_metrics
from seqbench.training.tune import apply_tuning

KS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
DS = (1, 2, 5, 10, 20, 50, 100, 200)
WITHIN = 0.01  # "effective context": within 1 % of the full-context loss (Khandelwal et al. 2018, §3)


# -- the measurements (pure torch on a model with next_token_logits; tested) -------------------------
def sample_targets(n_tokens: int, n: int, need: int, seed: int = 0) -> torch.Tensor:
    """n sorted positions p in [need, n_tokens), drawn without replacement with a seeded generator."""
    eligible = n_tokens - need
    if eligible < 1:
        raise UserError(f"the split holds {n_tokens} tokens, too few for reads of {need} tokens; lower --ks, "
                        f"--prefix, or use a longer split.")
    g = torch.Generator().manual_seed(seed)
    picked = torch.randperm(eligible, generator=g)[: min(n, eligible)] + need
    return picked.sort().values


def windows(stream: torch.Tensor, positions: torch.Tensor, k: int) -> torch.Tensor:
    """(B, k): row b is stream[p_b - k : p_b], the k tokens before target p_b."""
    return stream[positions[:, None] - k + torch.arange(k)]


def nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-target negative log-likelihood in nats, (B, V) and (B,) -> (B,), in float32."""
    return F.cross_entropy(logits.float(), targets, reduction="none")


@torch.inference_mode()
def read_losses(model, stream: torch.Tensor, positions: torch.Tensor, k: int, batch_tokens: int = 16384,
                perturb=None) -> torch.Tensor:
    """Loss of each target read from the k tokens before it (`perturb` may change those reads first).

    Batched: B = batch_tokens // k targets at a time, each a row of k tokens.
    """
    out = []
    step = max(1, batch_tokens // k)
    for i in range(0, len(positions), step):
        p = positions[i : i + step]
        x = windows(stream, p, k)
        if perturb is not None:
            x = perturb(x)
        out.append(nll(model.next_token_logits(x.to(model.device)).cpu(), stream[p]))
    return torch.cat(out)


@torch.inference_mode()
def full_context_losses(model, stream: torch.Tensor, positions: torch.Tensor, chunk: int = 4096,
                        batch_tokens: int = 16384) -> torch.Tensor:
    """Each target's loss with all the context the model has in an ordinary evaluation.

    Recurrent (`lm_batching == "stream"`): one pass over the split from its first token with the state
    carried, read out at the sampled positions. Attention: the `context` tokens before the target.
    """
    if getattr(model, "lm_batching", None) != "stream":
        return read_losses(model, stream, positions, model.context, batch_tokens)
    out, state, at = [], None, 0
    for p in positions.tolist():
        while p - at > chunk:  # long gaps: read on in chunks, the state is all that is kept
            _, state = model.read_on(stream[None, at : at + chunk].to(model.device), state)
            at += chunk
        logits, state = model.read_on(stream[None, at:p].to(model.device), state)
        out.append(nll(logits.cpu(), stream[p : p + 1]))
        at = p
    return torch.cat(out)


def shuffle_far(d: int, generator: torch.Generator):
    """x (B, L) -> x with x[:, :L-d] permuted within each row (its own permutation per row)."""
    def apply(x: torch.Tensor) -> torch.Tensor:
        far = x.size(1) - d
        if far < 2:
            return x
        order = torch.rand(x.size(0), far, generator=generator).argsort(dim=1)  # (B, far)
        return torch.cat([x[:, :far].gather(1, order), x[:, far:]], dim=1)
    return apply


def replace_far(d: int, unigram: torch.Tensor, generator: torch.Generator):
    """x (B, L) -> x with x[:, :L-d] drawn i.i.d. from `unigram` (training-split token frequencies)."""
    def apply(x: torch.Tensor) -> torch.Tensor:
        far = x.size(1) - d
        if far < 1:
            return x
        drawn = torch.multinomial(unigram, x.size(0) * far, replacement=True, generator=generator)
        return torch.cat([drawn.view(x.size(0), far), x[:, far:]], dim=1)
    return apply


def paired(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """(mean of a - b, its standard error) over the same targets."""
    diff = (a - b).double()
    se = diff.std().item() / math.sqrt(len(diff)) if len(diff) > 1 else float("nan")
    return diff.mean().item(), se


def effective_context(curve: list[tuple[int, float]], full: float, within: float = WITHIN) -> int | None:
    """The smallest k whose loss is within `within` (relative) of the full-context loss; None if none is."""
    for k, loss in sorted(curve):
        if loss <= full * (1 + within):
            return k
    return None


def nearest_intact(rows: list[tuple[int, float]], intact: float, within: float = WITHIN) -> int | None:
    """The smallest d whose perturbation raises the loss by at most `within` of the intact loss."""
    for d, increase in sorted(rows):
        if increase <= intact * within:
            return d
    return None


# -- one run --------------------------------------------------------------------------------------
@dataclass
class LM:
    name: str
    family: str
    corpus: str
    model: object
    datamodule: object
    test_loss: float | None = None  # the run's ordinary test loss (its record), for reference
    results: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)  # the run's whole record (its tokens trained, its train loss)

    @property
    def window(self) -> int:
        """The tokens of one training row: an attention model's context, a recurrent model's BPTT length."""
        return self.datamodule.train_batch_shape(self.model)[1]

    @property
    def context(self) -> int | None:
        """The longest read the model takes (attention), None for a recurrent model (any length)."""
        return None if getattr(self.model, "lm_batching", None) == "stream" else self.model.context


def measure(lm: LM, split: str, positions: torch.Tensor, ks: list[int], prefix: int, ds: list[int], seed: int,
            batch_tokens: int) -> dict:
    """Every measurement of one model on the sampled targets, as plain numbers."""
    stream = lm.datamodule.streams[split]
    model = lm.model.eval()
    started = time.time()
    full = full_context_losses(model, stream, positions, batch_tokens=batch_tokens)
    ks = [k for k in ks if lm.context is None or k < lm.context] + ([lm.context] if lm.context else [])
    curve = []
    for k in ks:
        losses = read_losses(model, stream, positions, k, batch_tokens)
        delta, se = paired(losses, full)
        curve.append({"k": k, "loss": losses.mean().item(), "delta": delta, "se": se})
    intact = read_losses(model, stream, positions, prefix, batch_tokens)
    unigram = torch.bincount(lm.datamodule.streams["train"], minlength=lm.model.spec.vocab_size).double()
    perturbed = {"shuffle": [], "replace": []}
    for d in [d for d in ds if d < prefix]:
        for kind in perturbed:
            g = torch.Generator().manual_seed(seed * 1000 + d)
            change = shuffle_far(d, g) if kind == "shuffle" else replace_far(d, unigram, g)
            losses = read_losses(model, stream, positions, prefix, batch_tokens, change)
            delta, se = paired(losses, intact)
            perturbed[kind].append({"d": d, "loss": losses.mean().item(), "delta": delta, "se": se})
    full_loss = full.mean().item()
    intact_loss = intact.mean().item()
    return {
        "full": full_loss, "curve": curve, "intact": intact_loss, "perturbed": perturbed,
        "effective_context": effective_context([(c["k"], c["loss"]) for c in curve], full_loss),
        "order_range": nearest_intact([(r["d"], r["delta"]) for r in perturbed["shuffle"]], intact_loss),
        "identity_range": nearest_intact([(r["d"], r["delta"]) for r in perturbed["replace"]], intact_loss),
        "seconds": time.time() - started,
    }


# -- finding and loading runs ---------------------------------------------------------------------
def checkpoint_of(run_dir: Path) -> Path:
    """The run's tested checkpoint (its record), else its best-*.ckpt, else last.ckpt."""
    tested = (read_metrics(run_dir) or {}).get("tested_checkpoint")
    if tested and Path(tested).is_file():
        return Path(tested)
    best = sorted((run_dir / "checkpoints").glob("best-*.ckpt"))
    if best:
        return best[-1]
    if (run_dir / "checkpoints" / "last.ckpt").is_file():
        return run_dir / "checkpoints" / "last.ckpt"
    raise UserError(f"{run_dir / 'checkpoints'} holds no best-*.ckpt or last.ckpt; give a run directory of a "
                    f"language-model run, or a checkpoint file.")


def expand(paths: list[Path]) -> list[tuple[Path, Path]]:
    """(run dir, checkpoint) for each argument: a .ckpt file, a run directory, or a sweep directory."""
    found = []
    for path in paths:
        if path.is_file():
            run_dir = path.resolve().parent.parent  # <run>/checkpoints/<file>.ckpt
            if not (run_dir / ".hydra" / "config.yaml").is_file():
                raise UserError(f"{run_dir / '.hydra' / 'config.yaml'} not found: {path} must sit in the "
                                f"checkpoints/ folder of the run that wrote it.")
            found.append((run_dir, path))
        elif (path / ".hydra" / "config.yaml").is_file():
            found.append((path, checkpoint_of(path)))
        elif path.is_dir():
            jobs = sorted({p.parent.parent for p in path.glob("**/.hydra/config.yaml")})
            if not jobs:
                raise UserError(f"{path} holds no run (no .hydra/config.yaml below it); give run directories, "
                                f"sweep directories or checkpoint files.")
            found += [(job, checkpoint_of(job)) for job in jobs]
        else:
            raise UserError(f"{path} does not exist; give run directories, sweep directories or checkpoint files.")
    return found


def load_all(paths: list[Path]) -> list[LM]:
    """Every checkpoint the paths name (runs, sweeps, .ckpt files), in order; runs of one corpus share
    its data module, so the corpus is read once."""
    register_resolvers()
    datamodules: dict = {}
    return [load_lm(run_dir, ckpt, datamodules) for run_dir, ckpt in expand(paths)]


def group_by_corpus(lms: list[LM]) -> dict[str, list[LM]]:
    """The models of each corpus, in the order given: the measurements compare a corpus's models on the
    same sampled positions."""
    by_corpus: dict[str, list[LM]] = {}
    for lm in lms:
        by_corpus.setdefault(lm.corpus, []).append(lm)
    return by_corpus


def load_lm(run_dir: Path, ckpt: Path, datamodules: dict) -> LM:
    """The run's model with the checkpoint's weights, and its data (one DataModule per identical data config)."""
    import hydra
    from omegaconf import OmegaConf


    check_checkpoint(ckpt)  # before the data is read: a file that would run code is refused first
    cfg = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    apply_tuning(cfg)  # the size the run trained at: tune.per_family's, not the preset's default the file says
    # only the data and model nodes: the rest refers to ${hydra:...}, which exists only inside a Hydra job
    key = json.dumps(OmegaConf.to_container(cfg.data, resolve=True), sort_keys=True)
    if key not in datamodules:
        dm = hydra.utils.instantiate(cfg.data)
        dm.setup("fit")
        datamodules[key] = dm
    dm = datamodules[key]
    if getattr(dm, "task", None) != "lm":
        raise UserError(f"{run_dir} is not a language-model run (its data poses {getattr(dm, 'task', '?')!r}); "
                        f"context usage is measured on language models.")
    model = hydra.utils.instantiate(cfg.model, spec=dm.spec)
    load_weights(model, ckpt)
    metrics = read_metrics(run_dir) or {}
    # the registry's family of the run's model config (seqbench.families: its module and selector keys)
    return LM(run_label(run_dir), family_of(cfg.model), dm.corpus, model, dm, metrics.get("test/loss"),
              metrics=metrics)


def run_label(run_dir: Path) -> str:
    """A run's name in the tables: a sweep's job (a numbered folder) with its sweep, `<sweep>/<job>`, since
    runs of several sweeps are compared (job 0 of two sweeps is two models); any other run by its folder."""
    return f"{run_dir.parent.name}/{run_dir.name}" if run_dir.name.isdigit() else run_dir.name


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", type=Path, nargs="+", help="run directories, sweep directories or .ckpt files")
    parser.add_argument("--out", type=Path, default=Path("outputs/context_usage"))
    parser.add_argument("--split", choices=("valid", "test"), default="test")
    parser.add_argument("--targets", type=int, default=2000, help="sampled target positions per corpus")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ks", type=int, nargs="+", default=list(KS), help="context lengths k")
    parser.add_argument("--prefix", type=int, default=300, help="tokens read in the perturbation experiments")
    parser.add_argument("--ds", type=int, nargs="+", default=list(DS), help="distances d left intact")
    parser.add_argument("--batch-tokens", type=int, default=16384, help="tokens per forward pass")
    args = parser.parse_args(argv)
    if min(args.ks) < 1 or min(args.ds) < 1 or args.prefix < 1 or args.targets < 1 or args.batch_tokens < 1:
        raise UserError("--ks, --ds, --prefix, --targets and --batch-tokens must be positive.")

    started = time.time()
    lms = load_all(args.paths)
    by_corpus = group_by_corpus(lms)
    args.out.mkdir(parents=True, exist_ok=True)
    n_targets = {}
    for corpus, group in by_corpus.items():
        streams = {lm.datamodule.streams[args.split].numel() for lm in group}
        if len(streams) > 1:
            raise UserError(f"the {corpus} runs tokenise the {args.split} split differently ({sorted(streams)} "
                            f"tokens); give runs that share a vocabulary, or one run at a time.")
        need = max([max(args.ks), args.prefix] + [lm.context or 0 for lm in group])
        positions = sample_targets(streams.pop(), args.targets, need, args.seed)
        n_targets[corpus] = len(positions)
        for lm in group:
            lm.results = measure(lm, args.split, positions, args.ks, args.prefix, args.ds, args.seed, args.batch_tokens)
            print(f"{corpus} {lm.family} {lm.name}: full {lm.results['full']:.3f}, effective context "
                  f"{lm.results['effective_context']}, {lm.results['seconds']:.0f} s", file=sys.stderr)
        plot_corpus(corpus, group, args.out / f"context_{corpus}.png", len(positions), args.prefix)
    write_csv(lms, args.out / "context_usage.csv", n_targets)
    (args.out / "context_usage.md").write_text(table(lms, n_targets, args.split, args.prefix))
    write_record(args.out, ["context_usage.csv", "context_usage.md"],
                 command_line("seqbench.analysis.context_usage", argv), started)  # the ledger
    print(args.out / "context_usage.md")
    return {lm.name: lm.results for lm in lms}


if __name__ == "__main__":
    run_command(main, sys.argv[1:])
