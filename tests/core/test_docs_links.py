"""Every relative link in the README, BENCHMARKS.md and docs/ leads somewhere: the file (or folder) exists, and a
``#anchor`` into a Markdown file names one of its headings. Reads files only: fast, no network.

Anchors follow GitHub's rendering of headings: lower case, punctuation dropped except ``-`` and ``_``, spaces
become ``-``, and a repeated heading gets ``-1``, ``-2``...
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# [text](target) and ![alt](target), with an optional "title"; reference definitions `[name]: target`.
_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`]*`")
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


@dataclass(frozen=True)
class BrokenLink:
    source: Path
    line: int
    target: str
    reason: str

    def __str__(self) -> str:
        return (
            f"{self.source.relative_to(ROOT) if self.source.is_relative_to(ROOT) else self.source}:{self.line}: "
            f"{self.target} ({self.reason})"
        )


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    lines, in_fence = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            lines.append((number, line))
    return lines


def heading_slug(heading: str) -> str:
    """GitHub's anchor for a heading's text (before de-duplication)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown: Path) -> set[str]:
    """The anchors a Markdown file offers: its headings' slugs, de-duplicated as GitHub does, and HTML anchors."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    text = markdown.read_text(encoding="utf-8")
    for _, line in _prose_lines(text):
        heading = _HEADING.match(line)
        if heading:
            slug = heading_slug(heading.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
        found.update(_HTML_ANCHOR.findall(line))
    return found


def links(markdown: Path) -> list[tuple[int, str]]:
    """(line, target) of every link in a Markdown file's prose (not in code blocks or inline code)."""
    found = []
    for number, line in _prose_lines(markdown.read_text(encoding="utf-8")):
        prose = _INLINE_CODE.sub("", line)
        found += [(number, target) for target in _INLINE_LINK.findall(prose)]
        reference = _REFERENCE_LINK.match(prose)
        if reference:
            found.append((number, reference.group(1)))
    return found


def broken_links(markdown: Path) -> list[BrokenLink]:
    """The relative links of ``markdown`` that lead nowhere (external ones are not followed)."""
    broken = []
    for line, target in links(markdown):
        if _EXTERNAL.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        destination = (markdown.parent / path_part).resolve() if path_part else markdown
        if not destination.exists():
            broken.append(BrokenLink(markdown, line, target, "no such file"))
        elif anchor and destination.suffix == ".md" and anchor not in anchors(destination):
            broken.append(BrokenLink(markdown, line, target, f"no heading #{anchor} in {destination.name}"))
    return broken


def documentation_files() -> list[Path]:
    """README.md, BENCHMARKS.md and every Markdown file under docs/."""
    return [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_relative_link_in_the_documentation_leads_somewhere() -> None:
    files = documentation_files()
    assert len(files) > 20, "the documentation was not found"
    broken = [str(link) for markdown in files for link in broken_links(markdown)]
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


# A page named in prose rather than linked ("docs/ray.md, 'Shared model servers'"): the repository-relative path.
_NAMED_PAGE = re.compile(r"(?<![\w/.-])(docs/[\w./-]*\.md)(?![\w/-])")


def missing_named_pages(markdown: Path) -> list[BrokenLink]:
    """The ``docs/....md`` pages that ``markdown`` names in its prose (inline code included) and that do not exist."""
    return [
        BrokenLink(markdown, line, page, "no such file")
        for line, text in _prose_lines(markdown.read_text(encoding="utf-8"))
        for page in _NAMED_PAGE.findall(text)
        if not (ROOT / page).is_file()
    ]


def test_every_docs_page_named_in_the_documentation_exists() -> None:
    missing = [str(page) for markdown in documentation_files() for page in missing_named_pages(markdown)]
    assert not missing, "pages named that do not exist:\n" + "\n".join(missing)


def test_the_check_finds_a_named_page_that_does_not_exist(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "See docs/ray.md and `docs/results/README.md`; docs/nowhere.md is gone.\n```\ndocs/in-code.md\n```\n"
    )
    assert [(b.line, b.target) for b in missing_named_pages(page)] == [(1, "docs/nowhere.md")]


def test_the_check_finds_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "page.md").write_text("# A page\n\n## Where it `stands` (measured)\n\n## Notes\n\n## Notes\n")
    index = tmp_path / "index.md"
    index.write_text(
        "See [the page](sub/page.md), [its figures](sub/page.md#where-it-stands-measured),\n"
        "[the second notes](sub/page.md#notes-1), [top](#home) and [the web](https://example.org/x.md).\n"
        "# Home\n"
        "```\n[in code](nowhere.md)\n```\n"
        "`[inline code](nowhere.md)`\n"
        "Broken: [gone](sub/gone.md), [bad anchor](sub/page.md#results), [self](#nowhere).\n"
        "[ref]: sub/missing.png\n"
    )
    assert [(b.line, b.target) for b in broken_links(index)] == [
        (8, "sub/gone.md"),
        (8, "sub/page.md#results"),
        (8, "#nowhere"),
        (9, "sub/missing.png"),
    ]


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("The README's table in full", "the-readmes-table-in-full"),
        ("Repeating a run: `--config`", "repeating-a-run---config"),
        ("6. Measured", "6-measured"),
        ("Evaluation: `homie eval --agents robot+human`", "evaluation-homie-eval---agents-robothuman"),
    ],
)
def test_heading_anchors_follow_github(heading: str, slug: str) -> None:
    assert heading_slug(heading) == slug
