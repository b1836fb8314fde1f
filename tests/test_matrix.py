"""The README's model x data matrix is the code's: every ✓ is a pair whose family implements the
data's task, and every pair that runs has its ✓ (the table is `python -m seqbench.analysis.matrix`)."""

import pytest

from conftest import ROOT
from seqbench.analysis.matrix import BEGIN, END, block, corpora, families, replace_block


def test_the_readme_shows_the_matrix_the_code_supports():
    assert block() in (ROOT / "README.md").read_text(encoding="utf-8"), (
        "README.md's model x data table is stale: run `python -m seqbench.analysis.matrix --write README.md`")


def test_writing_the_matrix_replaces_only_what_is_between_the_markers():
    text = f"before\n{BEGIN}\n| old |\n{END}\nafter\n"
    assert replace_block(text, block()) == f"before\n{block()}\nafter\n"
    with pytest.raises(ValueError, match="markers"):
        replace_block("no markers here", block())


def test_families_are_families_not_size_presets():
    names = set(families())
    assert not {"gpt_nano", "gpt2_small"} & names  # presets of gpt, not rows of their own
    assert corpora()["ptb"] == "lm" and corpora()["mnist"] == "image"
