"""What changed between two vLLM releases: findings fixed, findings new, cells that moved.

Cells are paired by fixture x transformers version x subject x check; only pairs that both
releases ran (neither `n/a`, e.g. a transformers version below one release's window) are
compared. A finding is shown by a release when one of its compared cells is `xfail` naming it.
report.md has this section for a run over several vLLMs (each against the first), and
`conformance gate --baseline-vllm` prints it for the baseline's vLLM against the run's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from conformance.results.cells import cells_text, one_line
from conformance.results.known import title_of
from conformance.results.verdict import Verdict

Pair = tuple[Verdict, Verdict]  # (old release's cell, new release's cell)


def _same_cell(v: Verdict) -> tuple[str, str, str, str]:
    return (v.fixture, v.version, v.subject, v.check)


def _outcome(v: Verdict) -> tuple[str, str]:
    return (v.status, v.finding if v.status in ("xfail", "xpass") else "")


@dataclass
class ReleaseDiff:
    old: str
    new: str
    compared: int = 0  # cells both releases ran
    one_side: int = 0  # cells n/a (or absent) in one of them
    fixed: dict[str, list[Pair]] = field(default_factory=dict)  # finding -> its old cells
    new_findings: dict[str, list[Pair]] = field(default_factory=dict)  # finding -> new cells
    moved: list[Pair] = field(default_factory=list)  # another status or finding

    @property
    def unchanged(self) -> bool:
        return not (self.fixed or self.new_findings or self.moved)


def compare_releases(verdicts: list[Verdict], old: str, new: str) -> ReleaseDiff:
    """Release `new`'s cells against release `old`'s (both among `verdicts`, labels as the
    cells' `vllm`)."""
    before = {_same_cell(v): v for v in verdicts if v.vllm == old}
    after = {_same_cell(v): v for v in verdicts if v.vllm == new}
    diff = ReleaseDiff(old, new)
    pairs = []
    for key in sorted(before.keys() | after.keys()):
        was, now = before.get(key), after.get(key)
        if was is None or now is None or "n/a" in (was.status, now.status):
            diff.one_side += 1
            continue
        pairs.append((was, now))
    diff.compared = len(pairs)

    def shown(side: int) -> dict[str, list[Pair]]:
        found: dict[str, list[Pair]] = {}
        for pair in pairs:
            if pair[side].status == "xfail" and pair[side].finding:
                found.setdefault(pair[side].finding, []).append(pair)
        return found

    on_old, on_new = shown(0), shown(1)
    diff.fixed = {f: cells for f, cells in on_old.items() if f not in on_new}
    diff.new_findings = {f: cells for f, cells in on_new.items() if f not in on_old}
    diff.moved = [(was, now) for was, now in pairs if _outcome(was) != _outcome(now)]
    return diff


def _status(v: Verdict) -> str:
    return f"{v.status} ({v.finding})" if v.finding and v.status in ("xfail", "xpass") \
        else v.status


def _cell(v: Verdict) -> str:
    return f"{v.fixture}/{v.subject}/{v.check}@{v.version}"


def render_lines(diff: ReleaseDiff, markdown: bool = False) -> list[str]:
    """The section as lines: Markdown for report.md, plain text for `gate`."""
    item = "- " if markdown else "  "
    code = (lambda t: f"`{t}`") if markdown else (lambda t: t)
    gap = [""] if markdown else []
    summary = ("nothing moved" if diff.unchanged else
               f"findings fixed {len(diff.fixed)}, findings new {len(diff.new_findings)}, "
               f"cells moved {len(diff.moved)}")
    lines = [f"## Between vLLM {diff.old} and vLLM {diff.new}" if markdown
             else f"BETWEEN vLLM {diff.old} AND vLLM {diff.new}", *gap,
             f"{cells_text(diff.compared)} run by both ({diff.one_side} by one only: transformers "
             f"outside the other's window, or not run): {summary}.", *gap]
    for title, group, release in (("Findings fixed", diff.fixed, diff.old),
                                  ("Findings new", diff.new_findings, diff.new)):
        if group:
            lines.append(f"{title} ({len(group)}), shown by vLLM {release} only:")
            lines += [f"{item}{code(finding)} ({cells_text(len(pairs))}): {title_of(finding)}"
                      for finding, pairs in group.items()]
            lines += gap
    if diff.moved:
        lines.append(f"Cells moved ({len(diff.moved)}), vLLM {diff.old} -> vLLM {diff.new}:")
        for was, now in diff.moved:
            detail = "" if now.status == "pass" else ": " + one_line(now.detail, 200)
            lines.append(f"{item}{_cell(now)}: {_status(was)} -> {_status(now)}{detail}")
        lines += gap
    return lines


def markdown_sections(verdicts: list[Verdict], found: list[str]) -> list[str]:
    """report.md: each further vLLM of the run (`found`, in order) against the first (none
    for one vLLM)."""
    lines: list[str] = []
    for new in found[1:]:
        lines += render_lines(compare_releases(verdicts, found[0], new), markdown=True)
    return lines
