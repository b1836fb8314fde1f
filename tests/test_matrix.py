"""The README's model x data matrix is the code's: every ✓ is a pair whose family implements the
data's task, and every pair that runs has its ✓ (the table is `python -m seqbench.analysis.matrix`)."""

from conftest import ROOT
from seqbench.analysis.matrix import corpora, families, markdown


def test_the_readme_shows_the_matrix_the_code_supports():
    assert markdown() in (ROOT / "README.md").read_text(encoding="utf-8"), (
        "README.md's model x data table is stale: paste the output of `python -m seqbench.analysis.matrix`")


def test_families_are_families_not_size_presets():
    names = set(families())
    assert not {"gpt_nano", "gpt2_small"} & names  # presets of gpt, not rows of their own
    assert corpora()["ptb"] == "lm" and corpora()["mnist"] == "image"
