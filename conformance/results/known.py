"""Known failures (xfail cells) grouped by the finding that explains them.

A run on many versions repeats each finding over dozens of cells; every view (gate, report.md,
report.html) lists a finding once, with the cells it covers. Cells recorded before verdicts named
their finding (no `finding` id) stay ungrouped and are listed one by one.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING

from conformance import expectations
from conformance.results.cells import one_line, short_label
from conformance.results.evidence import line
from conformance.results.verdict import Verdict

if TYPE_CHECKING:
    from conformance.expectations import Finding


@dataclass(frozen=True)
class KnownGroup:
    finding: str
    title: str
    cells: tuple[Verdict, ...]


def _findings_by_id() -> dict:

    return {f.id: f for f in expectations.load()}


def finding_of(finding_id: str) -> Finding | None:
    """The finding of this checkout's findings.toml with this id, or None."""
    return _findings_by_id().get(finding_id)


def title_of(finding_id: str) -> str:
    finding = _findings_by_id().get(finding_id)
    # results may come from another checkout whose findings.toml had this id
    return finding.title if finding else "(not in this checkout's findings.toml)"


def group_known(verdicts: list[Verdict]) -> tuple[list[KnownGroup], list[Verdict]]:
    """The xfail cells by finding (findings.toml's order, then ids it lacks), and those
    without a finding id."""
    known = [v for v in verdicts if v.status == "xfail"]
    ids = list(_findings_by_id())
    named = {v.finding for v in known if v.finding}
    order = [i for i in ids if i in named] + sorted(named - set(ids))
    groups = [KnownGroup(i, title_of(i), tuple(v for v in known if v.finding == i))
              for i in order]
    return groups, [v for v in known if not v.finding]


def observed(v: Verdict) -> str:
    """What the cell showed, without the finding's reason in front of it."""
    if v.evidence is None:
        return one_line(v.detail, None)
    return one_line(line(v.status, v.evidence, "").strip(), None)


def wrapped_labels(cells: tuple[Verdict, ...] | list[Verdict], width: int = 100,
                   indent: str = "    ") -> list[str]:
    """The cells' short labels, comma-separated, wrapped between labels (never inside one)."""
    text = ", ".join(short_label(v) for v in cells)
    return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)
