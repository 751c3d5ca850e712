"""Every relative link of the guides (README.md, CONTRIBUTING.md, docs/*.md) points at a file or folder of the
repository, and every #anchor at a heading of its page, as GitHub renders them: moving a section must not leave a
link behind."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import paths
import pytest

PAGES = sorted([paths.REPO / "README.md", paths.REPO / "CONTRIBUTING.md", *(paths.REPO / "docs").glob("*.md")])
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`+[^`]*`+")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced code blocks, inline code removed (links there are not links)."""
    lines, in_fence = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            lines.append(INLINE_CODE.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup and punctuation dropped, lower case, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    text = page.read_text(encoding="utf-8")
    in_fence = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        match = None if in_fence else HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            found.add(base if count == 0 else f"{base}-{count}")
            seen[base] = count + 1
    return found


def relative_links(page: Path) -> list[str]:
    links = []
    for line in prose_lines(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, https:, mailto: ...
                links.append(target)
    return links


def broken(page: Path, target: str) -> str | None:
    path_part, _, anchor = target.partition("#")
    destination = (page.parent / unquote(path_part)).resolve() if path_part else page
    if not destination.exists():
        return f"{target}: no such file"
    if paths.REPO.resolve() not in destination.parents and destination != paths.REPO.resolve():
        return f"{target}: outside the repository"
    if anchor:
        if destination.suffix != ".md" or destination.is_dir():
            return f"{target}: an anchor into a page that is not markdown"
        if unquote(anchor) not in anchors(destination):
            return f"{target}: no heading with the anchor #{anchor} in {destination.relative_to(paths.REPO)}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(paths.REPO)) for p in PAGES])
def test_every_relative_link_resolves(page):
    links = relative_links(page)
    problems = [problem for problem in (broken(page, link) for link in links) if problem]
    assert problems == []


def test_the_checker_sees_links_and_anchors():
    readme = paths.REPO / "README.md"
    links = relative_links(readme)
    assert "docs/ARCHITECTURE.md#the-direct-route" in links  # the README's link to the direct route's full account
    assert any(link.startswith("#") for link in links)
    assert "writing-codeinferencepy" in anchors(readme)
    assert broken(readme, "docs/ARCHITECTURE.md#the-direct-route") is None
    assert broken(readme, "docs/ARCHITECTURE.md#no-such-heading") is not None
    assert broken(readme, "docs/no-such-page.md") is not None
    assert broken(readme, "#no-such-heading") is not None


def test_the_readme_is_a_guide_of_at_most_650_lines():
    lines = (paths.REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 650, f"README.md has {lines} lines: move reference material to docs/"
