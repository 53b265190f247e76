"""Find the first transformers release where a cell changes, by binary search over releases:
where it goes bad (`bisect`), or where a known finding appears or disappears (`bisect_finding`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conformance.core.settings import current
from conformance.core.vllms import DEFAULT_VLLM
from conformance.results.verdict import BAD, CellKey, Verdict
from conformance.run.environments import ensure_env, parse
from conformance.run.session import Session
from conformance.run.versions import index_releases
from conformance.subjects.faults import Fault
from impl.version import parse_version

# A cell that could not run says nothing about a finding: the search stops there
UNDECIDED = frozenset({"error", "crash", "timeout", "inconclusive", "n/a"})


def released_versions(good: str, bad: str) -> list[str]:
    """Stable transformers releases from `good` to `bad` inclusive, from the package index."""
    low, high = sorted((parse_version(good), parse_version(bad)))
    return [v for v in index_releases() if low <= parse_version(v) <= high]


@dataclass
class BisectResult:
    first: str  # the first release on the far side of the change
    last: str  # the last release before it
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    appears: bool = True  # with a finding: it appears at `first` (False: it disappears there)

    @property
    def first_bad(self) -> str:
        return self.first

    @property
    def last_good(self) -> str:
        return self.last


def probe_cell(fixture: str, subject: str, check: str, fault: Fault | None = None,
               vllm: str | None = None) -> Callable[[str], Verdict]:
    """A probe running the cell on a version in its own worker (overlay on PYTHONPATH), the
    vLLM under test fixed (`vllm`: a release or a folder; default: the default release),
    through the cell runner as `conformance run` runs it; `fault` planted where it reaches
    the cell."""
    under_test = parse(vllm or DEFAULT_VLLM)
    ensure_env(under_test)

    def probe(version: str) -> Verdict:
        key = CellKey(fixture, version, subject, check, under_test.label)
        session = Session(current(), fault=fault)
        with tempfile.TemporaryDirectory() as logs:
            session.in_workers([key], Path(logs), vllms={under_test.label: under_test})
        return session.verdicts[0]

    return probe


def describe(verdict: Verdict) -> str:
    """A verdict's status, with the finding it names: `xfail (finding X)`."""
    return verdict.status + (f" (finding {verdict.finding})" if verdict.finding else "")


class Probes:
    """Each release probed once, logged as it comes; `judge` may refuse a verdict."""

    def __init__(self, probe: Callable[[str], Verdict], log: Callable[[str], None],
                 judge: Callable[[str, Verdict], None] = lambda version, verdict: None) -> None:
        self.probe, self.log, self.judge = probe, log, judge
        self.verdicts: dict[str, Verdict] = {}

    def __call__(self, version: str) -> Verdict:
        if version not in self.verdicts:
            verdict = self.verdicts[version] = self.probe(version)
            self.log(f"  transformers {version}: {describe(verdict)}")
            self.judge(version, verdict)
        return self.verdicts[version]


def evidence(verdict: Verdict) -> str:
    """What the cell observed, on one line: its first difference, else its detail."""
    found = verdict.evidence
    return " ".join((found.differences[0].text if found else verdict.detail).split())


def _search(versions: list[str], probes: Probes, side: Callable[[Verdict], bool]
            ) -> BisectResult:
    """The first release whose `side` differs from `versions[0]`'s, the ends differing (the
    callers check it, with a reason) and the change happening once."""
    start = side(probes(versions[0]))
    low, high = 0, len(versions) - 1  # low on the start's side, high on the other
    while high - low > 1:
        middle = (low + high) // 2
        if side(probes(versions[middle])) == start:
            low = middle
        else:
            high = middle
    return BisectResult(versions[high], versions[low], probes.verdicts, appears=not start)


def bisect(versions: list[str], probe: Callable[[str], Verdict],
           log: Callable[[str], None] = print) -> BisectResult:
    """`versions[0]` must be good and `versions[-1]` bad; returns the first bad release. A
    refusal names the status of the end that is not as it should be."""
    probes = Probes(probe, log)
    good, bad = versions[0], versions[-1]
    if (first := probes(good)).status in BAD:
        raise ValueError(f"the cell is {describe(first)} on the good version {good}, already "
                         f"bad: {evidence(first)[:300]}")
    if (last := probes(bad)).status not in BAD:
        hint = (f": use --finding {last.finding} to find when it appeared" if last.finding
                else ": nothing to bisect")
        raise ValueError(f"the cell is {describe(last)} on {bad}, not bad{hint}")
    return _search(versions, probes, lambda verdict: verdict.status in BAD)


def shows(verdict: Verdict, finding) -> bool:
    """Whether the cell shows `finding` (an `expectations.Finding`): the judge names it, or a
    difference no finding explains carries its evidence. The latter is how a finding shows
    outside the version bounds it records: the bounds are what a search by finding checks, so
    they cannot decide it; a difference another finding explains there is that one's."""
    found = verdict.evidence
    if verdict.status == "xfail":
        return finding.id in (verdict.finding, *(found.findings if found else ()))
    if verdict.status != "fail":  # pass, or xpass: listed, but it did not show
        return False
    unexplained = [d.text for d in found.unexplained] if found else [verdict.detail]
    return any(finding.shown_by(verdict.check, text, verdict.fixture) for text in unexplained)


def bisect_finding(versions: list[str], probe: Callable[[str], Verdict], finding,
                   log: Callable[[str], None] = print) -> BisectResult:
    """The first release of `versions` (oldest first) where `finding` appears (shown on the
    last, not the first) or disappears (shown on the first, not the last). A release whose
    cell could not run stops the search, naming it."""
    def judge(version: str, verdict: Verdict) -> None:
        if verdict.status in UNDECIDED:
            raise ValueError(f"the cell is {verdict.status} on {version}: it cannot say whether "
                             f"{finding.id} shows: {evidence(verdict)[:300]}")

    probes = Probes(probe, log, judge)
    first, last = probes(versions[0]), probes(versions[-1])
    if shows(first, finding) == shows(last, finding):
        where = "on both" if shows(first, finding) else "on neither"
        raise ValueError(f"{finding.id} shows {where} {versions[0]} ({describe(first)}) and "
                         f"{versions[-1]} ({describe(last)}): no release between them where "
                         "it appears or disappears")
    return _search(versions, probes, lambda verdict: shows(verdict, finding))
