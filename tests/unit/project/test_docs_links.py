"""The documentation links only to files inside the repository, and each link resolves.

A link is a markdown ``[text](target)`` in README.md or under docs/; web addresses and in-page anchors
are not files.  A link to a file outside the repository (a design-notes file on someone's machine) or
to a file that moved is a dead end for a reader of the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _dead_links(document: Path, text: str) -> list[str]:
    """The links of ``text`` (the content of ``document``) that are not files of the repository."""
    dead = []
    for link in _LINK.findall(text):
        if re.match(r"[a-z]+:|#", link):
            continue
        target = (document.parent / link.split("#")[0]).resolve()
        if not target.is_relative_to(ROOT) or not target.exists():
            dead.append(link)
    return dead


@pytest.mark.parametrize("document", _documents(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_of_a_document_is_a_file_of_the_repository(document: Path) -> None:
    assert _dead_links(document, document.read_text(encoding="utf-8")) == []


def test_a_link_outside_the_repository_or_to_a_missing_file_is_found() -> None:
    text = (
        "see [the notes](../../shared/docs/design-notes.md), [gone](gone.md), [applier](applier.md), "
        "[hudi](https://hudi.apache.org) and [here](#resuming)"
    )

    dead = _dead_links(ROOT / "docs" / "bootstrap.md", text)

    assert dead == ["../../shared/docs/design-notes.md", "gone.md"]


def test_the_documents_mention_no_file_outside_the_repository() -> None:
    found = [
        doc.relative_to(ROOT).as_posix()
        for doc in _documents()
        if re.search(r"design[- ]notes\.md|/work/", doc.read_text(encoding="utf-8"))
    ]
    assert found == []
