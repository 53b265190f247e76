"""The documents as references: README.md at most 16 KB (the entry point; detail lives in docs/),
every relative link in README.md and docs/*.md reaches a file and, with an #anchor, a heading
of it (GitHub's slugs) or an `<a id>`; and docs/performance.md and docs/versions.md cite their
figures by reports/bench.json key, never by calendar date (bench.json keeps the history).
Each check is shown catching a planted fault."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_layers import ROOT

README = ROOT / "README.md"
README_LIMIT = 16_000  # bytes, `wc -c`
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
UNDATED = [ROOT / "docs" / "performance.md", ROOT / "docs" / "versions.md"]
DATE = re.compile(r"20\d\d-\d\d-\d\d")

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ID = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, inline code spans blanked out."""
    lines, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(_INLINE_CODE.sub("", line))
    return lines


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its rendered text lowercased, punctuation dropped
    (letters, digits, '_' and '-' kept), each space a '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor of a document: its headings' slugs (a repeated one gets -1, -2, ... as on
    GitHub) and its explicit `<a id=...>` / `<a name=...>`."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = _HEADING.match(line)
        if heading:
            slug = github_slug(heading.group(2))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
        found.update(_ID.findall(line))
    return found


def relative_links(text: str) -> list[str]:
    """The targets of the markdown links outside code that point into the repository (no
    scheme: not http(s), mailto, ...)."""
    targets = []
    for line in prose_lines(text):
        for target in _LINK.findall(line):
            if not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                targets.append(target)
    return targets


def broken_links(path: Path, text: str) -> list[str]:
    """The relative links of `text` (the document at `path`) that reach no file, or whose
    #anchor is no heading or `<a id>` of the markdown file they reach."""
    broken = []
    for target in relative_links(text):
        file_part, _, anchor = target.partition("#")
        reached = (path.parent / file_part).resolve() if file_part else path
        if file_part and not reached.exists():
            broken.append(f"{target}: no file {reached}")
            continue
        if not anchor or reached.suffix != ".md" or reached.is_dir():
            continue
        body = text if reached == path else reached.read_text()
        if anchor not in anchors(body):
            broken.append(f"{target}: no heading of {reached.name} has the anchor #{anchor}")
    return broken


def oversize(text: str, limit: int = README_LIMIT) -> int:
    """How many bytes `text` is over `limit` (0: it fits)."""
    return max(0, len(text.encode()) - limit)


def calendar_dates(text: str) -> list[str]:
    """The calendar dates (YYYY-MM-DD) a reference should not carry."""
    return DATE.findall(text)


def test_the_readme_fits_in_16_kb():
    over = oversize(README.read_text())
    assert not over, (f"README.md is {over} bytes over {README_LIMIT}: move detail to docs/ "
                      "and link it")


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path):
    assert broken_links(path, path.read_text()) == []


@pytest.mark.parametrize("path", UNDATED, ids=lambda p: p.name)
def test_the_references_carry_no_calendar_dates(path: Path):
    assert calendar_dates(path.read_text()) == [], (
        f"{path.name}: cite the figure's reports/bench.json key; bench.json keeps the dates")


def test_github_slugs():
    assert github_slug("A release whose CPU runner needs more: vLLM 0.34.0 on the CPU") == \
        "a-release-whose-cpu-runner-needs-more-vllm-0340-on-the-cpu"
    assert github_slug("`conformance check`, in full") == "conformance-check-in-full"
    assert github_slug("Config variants: fields a real checkpoint sets otherwise") == \
        "config-variants-fields-a-real-checkpoint-sets-otherwise"
    assert anchors("# Runs\n## Runs\n```\n# not a heading\n```\n<a id='x-1'></a>\n") == \
        {"runs", "runs-1", "x-1"}


def test_a_planted_oversized_readme_is_caught():
    assert oversize("x" * README_LIMIT) == 0
    assert oversize("x" * (README_LIMIT + 1)) == 1
    assert oversize("é" * (README_LIMIT // 2 + 1)) == 2  # bytes, as `wc -c` counts them


def test_a_planted_broken_link_is_caught(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## A section: its part\n")
    page = tmp_path / "README.md"
    good = ("[a](docs/other.md) [b](docs/other.md#a-section-its-part) [c](#top) "
            "[d](https://example.com/x#y) `[e](docs/none.md)`\n\n# Top\n")
    assert broken_links(page, good) == []
    for bad in ["[a](docs/none.md)", "[b](docs/other.md#a-section)", "[c](#nowhere)",
                "see ([b](docs/other.md#a-section-its-parts)).", "![img](docs/none.png)"]:
        assert len(broken_links(page, good + bad + "\n")) == 1, bad
    assert broken_links(page, "```\n[a](docs/none.md)\n```\n") == []  # code is not a link


def test_a_planted_date_is_caught():
    assert calendar_dates("the main job took 8.8 min (`matrix`)") == []
    assert calendar_dates("the main job took 8.8 min (2026-12-07)") == ["2026-12-07"]


def test_the_readme_says_which_release_profile_impl_follows():
    """Per vLLM of the default axis, the profile impl follows and its steps, as impl/release.py
    has them (`conformance.checks.impl_profiles_markdown()` writes the table)."""
    from conformance.checks import impl_profiles_markdown

    assert impl_profiles_markdown() in README.read_text(), \
        "README's impl profile table is stale: paste conformance.checks.impl_profiles_markdown()"
