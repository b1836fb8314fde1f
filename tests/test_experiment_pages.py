"""Every `python src/train.py ...` command on the experiment pages (experiments/*.md) composes and
passes the run's checks as written, as the README's do (tests/test_readme_commands.py: the same
reading of code blocks and inline spans, the same placeholders). A page is where a user copies a
comparison's command from; a rename of a group or a preset must rewrite it, not break it.

A sweep is composed once per value of each axis, not as the full product (the pages' pretraining
sweeps hold 36 jobs each): every value of every axis — every preset of a sweep — is composed once.
"""

from __future__ import annotations

import functools
import re
import tempfile
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from test_readme_commands import _commands, _fill, _train_args

from conftest import ROOT, compose_cfg
from seqbench.training.config_check import check_config

PAGES = sorted((ROOT / "experiments").glob("*.md"))
# Written for the reader to fill in: a preset `probe/<f>` and `<overrides>` name no file.
PROSE = re.compile(r"/<f>|<overrides>")


def _page_lines() -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for page in PAGES:
        for line in _commands(page.read_text(encoding="utf-8")):
            if _train_args(line) is not None and not PROSE.search(line):
                seen.setdefault(" ".join(line.split()), page.name)
    return [(page, line) for line, page in seen.items()]


def _args(line: str) -> list[str]:
    """The command's overrides, with placeholders filled by `_fill`: `<e16 ckpt>` (a placeholder with a
    space), `…` (a value the page elides) and an earlier run's checkpoint (`outputs/.../last.ckpt`,
    which this checkout has not trained); `probe/<lstm|gru>` and `data.T=100|200|400` are
    alternatives: the first."""
    line = re.sub(r"<[^<>]+>", lambda m: m.group().replace(" ", "_"), line)
    out = []
    for arg in _train_args(line):
        arg = re.sub(r"=(outputs/\S*\.ckpt)$", r"=<\1>", arg)
        arg = re.sub(r"<([^<>|]+)\|[^<>]*>", r"\1", arg)
        key, eq, value = arg.partition("=")
        out.append(f"{key}={value.split('|')[0]}" if eq and "|" in value else arg.replace("…", "<elided>"))
    return out


@functools.cache
def _experiment_axes(experiment: tuple[str, ...]) -> dict:
    """The sweep axes an experiment sets (`hydra.sweeper.params`, resolved), composed once per experiment:
    the pages sweep the same few many times (pretraining ten times). No run is made: nothing is written
    to the output directory, so the temporary one goes at once."""
    with tempfile.TemporaryDirectory() as out:
        swept = OmegaConf.select(compose_cfg(list(experiment), Path(out)), "hydra.sweeper.params")
    return OmegaConf.to_container(swept, resolve=True) if swept else {}


def _jobs(args: list[str]) -> list[list[str]]:
    """One job per value of the longest axis, every axis (the command line's and the experiment's own
    sweep, `preset` among them) cycling through its values."""
    if "-m" not in args and "--multirun" not in args:
        return [args]
    args = [a for a in args if a not in ("-m", "--multirun")]
    axes = {a.split("=", 1)[0]: a.split("=", 1)[1].split(",") for a in args
            if "," in a.partition("=")[2] and not a.partition("=")[2].startswith(("[", "'", '"'))}
    fixed = [a for a in args if a.split("=", 1)[0] not in axes]
    # the experiment's own axes may set keys of its presets (size=)
    experiment = tuple(a for a in fixed if a.startswith("experiment="))
    for key, values in (_experiment_axes(experiment) if experiment else {}).items():
        if key.lstrip("+") not in {k.lstrip("+") for k in axes} and "(" not in str(values):
            axes[key] = str(values).split(",")
    n = max((len(v) for v in axes.values()), default=1)
    return [fixed + [f"{k}={v[i % len(v)]}" for k, v in axes.items()] for i in range(n)]


def test_the_pages_have_the_lines_this_test_reads():
    lines = [line for _, line in _page_lines()]
    assert len(lines) >= 80
    assert "python src/train.py preset=mnist/cnn logger=csv trainer=cpu trainer.enable_progress_bar=false" in lines
    assert any("preset=multi30k/bahdanau logger=csv trainer=cpu" in line for line in lines)  # $COMMON expanded


@pytest.mark.parametrize(("page", "line"), _page_lines())
def test_every_experiment_page_training_line_composes_and_passes_the_checks(page, line, tmp_path):
    args = _fill(_args(line), tmp_path)
    for job in _jobs(args):
        if any(a.startswith("experiment=pretraining") for a in job) and not any(a.startswith("pretrained.") for a in job):
            job = [*job, f"pretrained.bert={tmp_path / 'bert.ckpt'}", f"pretrained.gpt={tmp_path / 'gpt.ckpt'}"]
        cfg = compose_cfg(job, tmp_path)
        check_config(cfg, {k: v for k, v in cfg.hydra.runtime.choices.items() if isinstance(v, str)})
