"""Why a candidate architecture has no fixture, read from `coverage.toml` (reviewable data).

The candidates are what `conformance coverage` probes: every generative multimodal model type of
each transformers version of the full matrix (`reports/coverage.json` holds the probes, rewritten by
`conformance coverage --write`). Each one has a fixture (by its class) or an entry here:
`planned` (no fixture yet: the work list; `attempted` says, for those the generic attempt
reached, how far it got: built through the backend, or stopped before it by what it could not
make) or `unservable` (a real attempt failed: the reason, the message it failed with and the
script that makes the attempt alone).
`tests/test_coverage.py` fails on a candidate with neither, so coverage cannot fall behind a
transformers release silently, and on an entry that a fixture or the probes made stale.
"""

from __future__ import annotations

import functools
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.paths import REPORTS_DIR, ROOT

COVERAGE_FILE = Path(__file__).resolve().parent / "coverage.toml"
SNAPSHOT = REPORTS_DIR / "coverage.json"  # the probes of the full matrix's versions
PLANNED, UNSERVABLE = "planned", "unservable"


@dataclass(frozen=True)
class Unservable:
    model_type: str
    reason: str  # why the backend cannot serve it, in a sentence
    evidence: str  # the message, field or value of the real attempt
    confirmed_by: str  # the attempt as a standalone script, from the repository root
    # the fixture whose class this model type shares while its own config is what fails
    # (pp_chart2table: GotOcr2ForConditionalGeneration under PPChart2TableConfig): the class's
    # fixture does not cover it
    shares_class_with: str = ""


@dataclass(frozen=True)
class Catalogue:
    planned: frozenset[str]
    unservable: Mapping[str, Unservable]
    # planned model type -> what reports/confirm/coverage_attempt.py measured of it
    attempted: Mapping[str, str] = field(default_factory=dict)

    def covers(self, model_type: str, architecture: str,
               fixtures: Mapping[str, list[str]]) -> list[str]:
        """The fixtures that cover a model type: its class's, unless its own config is
        unservable under that class (`shares_class_with`)."""
        entry = self.unservable.get(model_type)
        if entry is not None and entry.shares_class_with:
            return []
        return list(fixtures.get(architecture, []))

    def status(self, model_type: str) -> str | None:
        if model_type in self.unservable:
            return UNSERVABLE
        return PLANNED if model_type in self.planned else None


@functools.cache
def load(path: Path = COVERAGE_FILE) -> Catalogue:
    """The catalogue; a malformed entry is refused in one line naming it."""
    data = tomllib.loads(path.read_text())
    planned = data.get("planned", [])
    if len(set(planned)) != len(planned):
        raise ValueError(f"{path.name}: a model type is planned twice")
    unservable: dict[str, Unservable] = {}
    for raw in data.get("unservable", []):
        try:
            entry = Unservable(**raw)
        except TypeError as error:
            raise ValueError(f"{path.name}: unservable entry {raw.get('model_type')!r}: "
                             f"{error}") from None
        if not (entry.reason and entry.evidence):
            raise ValueError(f"{path.name}: {entry.model_type}: unservable needs its reason and "
                             "the evidence of a real attempt")
        if not (ROOT / entry.confirmed_by).is_file():
            raise ValueError(f"{path.name}: {entry.model_type}: confirmed_by "
                             f"{entry.confirmed_by!r} is no file of the repository")
        if entry.model_type in unservable or entry.model_type in planned:
            raise ValueError(f"{path.name}: {entry.model_type} has two entries")
        unservable[entry.model_type] = entry
    attempted = data.get("attempted", {})
    if not_planned := sorted(set(attempted) - set(planned)):
        raise ValueError(f"{path.name}: attempted lists model types that are not planned: "
                         f"{', '.join(not_planned)}")
    return Catalogue(frozenset(planned), unservable, attempted)


def read_snapshot(path: Path = SNAPSHOT) -> list[dict[str, Any]]:
    """The committed probes, one per default transformers version."""
    return json.loads(path.read_text())


def uncovered(probes: list[dict[str, Any]], fixtures: Mapping[str, list[str]],
              catalogue: Catalogue, every_version: bool = True) -> dict[str, list[str]]:
    """What the catalogue must say and does not: `missing`, candidates (with the versions that
    ship them) that have neither a fixture nor an entry; `stale`, entries for a model type that
    has a fixture now or (`every_version`: the probes are all the catalogue speaks for) that
    no probed version ships."""
    shipped: dict[str, list[str]] = {}
    covered: set[str] = set()
    sharing: set[str] = set()
    for p in probes:
        for c in p["candidates"]:
            shipped.setdefault(c["model_type"], []).append(p["transformers"])
            if catalogue.covers(c["model_type"], c["architecture"], fixtures):
                covered.add(c["model_type"])
            entry = catalogue.unservable.get(c["model_type"])
            if entry and entry.shares_class_with in fixtures.get(c["architecture"], []):
                sharing.add(c["model_type"])
    listed = set(catalogue.planned) | set(catalogue.unservable)
    missing = [f"{t} ({', '.join(v)})" for t, v in sorted(shipped.items())
               if t not in covered and t not in listed]
    stale = sorted(f"{t} (has a fixture)" for t in listed & covered)
    stale += sorted(f"{t} (shares_class_with names no fixture of its class)"
                    for t, e in catalogue.unservable.items()
                    if e.shares_class_with and t in shipped and t not in sharing)
    if every_version:
        stale += sorted(f"{t} (in no probed version)" for t in listed - set(shipped))
    return {"missing": missing, "stale": stale}
