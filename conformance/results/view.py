"""A run's verdicts grouped once, for every writer (report.md, report.html, junit.xml, the
terminal table): one verdict per cell in report order, the axes, the cells by column and by
(architecture, column), the bad cells, the known findings they meet and the model checks'
references."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable

from conformance.results.agreement import relations
from conformance.results.cells import (
    WORST_FIRST,
    column_of,
    columns_of,
    fixtures_of,
    latest_per_cell,
    sort_cells,
    versions_of,
    vllm_note,
    vllms_of,
)
from conformance.results.known import KnownGroup, group_known
from conformance.results.verdict import BAD, Verdict


class View:
    def __init__(self, verdicts: Iterable[Verdict]) -> None:
        self.verdicts: list[Verdict] = sort_cells(latest_per_cell(list(verdicts)))
        self.vllms = vllms_of(self.verdicts)
        self.several = len(self.vllms) > 1  # a column per (vLLM, transformers version)
        self.versions = versions_of(self.verdicts)
        self.columns = columns_of(self.verdicts)
        self.fixtures = fixtures_of(self.verdicts)
        self.note = vllm_note(self.verdicts)
        self.by_column: dict[str, list[Verdict]] = defaultdict(list)
        self.grid: dict[tuple[str, str], list[Verdict]] = defaultdict(list)
        for v in self.verdicts:
            column = column_of(v, self.several)
            self.by_column[column].append(v)
            self.grid[(v.fixture, column)].append(v)

    @functools.cached_property
    def known(self) -> tuple[list[KnownGroup], list[Verdict]]:
        """The xfail cells by finding, and those without a finding id (`known.group_known`)."""
        return group_known(self.verdicts)

    @functools.cached_property
    def bad(self) -> list[Verdict]:
        """The cells a person must look at (`verdict.BAD`), worst first, then in report
        order."""
        return sorted((v for v in self.verdicts if v.status in BAD),
                      key=lambda v: WORST_FIRST.index(v.status))

    @functools.cached_property
    def relations(self) -> dict[tuple[str, str, str], str]:
        """The model checks' cells: which references agree (`agreement.relations`)."""
        return relations(self.verdicts)


def as_view(verdicts: Iterable[Verdict] | View) -> View:
    return verdicts if isinstance(verdicts, View) else View(verdicts)
