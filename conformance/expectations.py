"""Known, understood disagreements: a failing cell listed here is `xfail` with this exact reason.

A cell listed here that passes is `xpass`, which counts as bad: the entry is stale and must go.
Never widen a comparison to make a cell pass; record the finding here instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.versions import parse_version


@dataclass(frozen=True)
class Known:
    fixture: str
    check: str
    reason: str  # the exact difference and its cause
    min_version: str | None = None  # inclusive
    max_version: str | None = None  # exclusive

    def applies(self, fixture: str, check: str, version: str) -> bool:
        if (fixture, check) != (self.fixture, self.check):
            return False
        v = parse_version(version)
        if self.min_version and v < parse_version(self.min_version):
            return False
        return not (self.max_version and v >= parse_version(self.max_version))


KNOWN: tuple[Known, ...] = ()


def known_reason(fixture: str, check: str, version: str) -> str | None:
    for entry in KNOWN:
        if entry.applies(fixture, check, version):
            return entry.reason
    return None
