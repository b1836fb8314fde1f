"""The README a newcomer enters: contents, quickstart, the findings summary, then the matrix; and
neither it nor the docs/ pages it links to point outside the repository or at a file that is not there."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXPERIMENT_PAGES = sorted((ROOT / "experiments").rglob("*.md"))  # the pages and the generated reports; they cite ../shared/reading
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_PATH = re.compile(r"`(\.\./[^`]*)`")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES + EXPERIMENT_PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_and_path_stays_inside_the_repository_and_exists(page):
    """A page moved or a heading renamed (tuning-protocol.md's log went to a page of its own) breaks no link."""
    text = page.read_text(encoding="utf-8")
    if page not in EXPERIMENT_PAGES:
        assert not CODE_PATH.findall(text), f"{page.name} names paths outside the repository: {CODE_PATH.findall(text)}"
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        assert file.is_relative_to(ROOT), f"{page.name} links outside the repository: {target}"
        assert file.exists(), f"{page.name} links to a file that is not there: {target}"
        if anchor and file.suffix == ".md":
            text = file.read_text(encoding="utf-8")
            # a heading's slug, or an explicit anchor (the generated findings page gives each claim a short one)
            anchors = {_slug(h) for h in re.findall(r"^#+ (.*)$", text, flags=re.M)} | set(re.findall(r'<a id="([^"]+)">', text))
            assert anchor in anchors, f"{page.name}: {target} names no heading or anchor of {file.name}"


def test_the_readme_opens_with_contents_quickstart_findings_then_the_matrix():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    order = ["## Contents", "## Quickstart", "<!-- findings-summary -->", "<!-- /findings-summary -->",
             "## Models × data"]
    at = [text.find(mark) for mark in order]
    assert -1 not in at and at == sorted(at), dict(zip(order, at))
    quickstart = text[at[1]:text.index("\n## ", at[1] + 1)]
    assert len(quickstart.splitlines()) <= 30, "the quickstart has grown past a screen"
    for needed in ("bash scripts/train.sh", "bash scripts/test.sh", "outputs/runs/", "wandb sync"):
        assert needed in quickstart, needed
