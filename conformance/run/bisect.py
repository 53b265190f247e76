"""Find the first transformers release where a cell goes bad, by binary search over releases."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conformance.results.verdict import BAD, CellKey, Verdict
from impl.version import parse_version

STABLE = re.compile(r"^\d+\.\d+\.\d+$")


def released_versions(good: str, bad: str) -> list[str]:
    """Stable transformers releases from `good` to `bad` inclusive, from the package index."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "transformers"],
                         capture_output=True, text=True)
    match = re.search(r"Available versions: (.*)", out.stdout)
    if out.returncode != 0 or match is None:
        raise RuntimeError("cannot list transformers releases from the package index: "
                           + (out.stderr.strip().splitlines() or ["no output"])[-1])
    low, high = parse_version(good), parse_version(bad)
    versions = [v.strip() for v in match.group(1).split(",")]
    return sorted((v for v in versions if STABLE.match(v) and low <= parse_version(v) <= high),
                  key=parse_version)


@dataclass
class BisectResult:
    first_bad: str | None
    last_good: str | None
    verdicts: dict[str, Verdict] = field(default_factory=dict)


def probe_cell(fixture: str, subject: str, check: str, fault: str | None = None,
               vllm: str | None = None) -> Callable[[str], Verdict]:
    """A probe running the cell on a version in its own worker (overlay on PYTHONPATH), the
    vLLM under test fixed (`vllm`: a release or a folder; default 0.31.0)."""
    from conformance.core import vllms
    from conformance.core.settings import current
    from conformance.run.session import Session

    under_test = vllms.parse(vllm or vllms.DEFAULT_VLLM)
    vllms.ensure_env(under_test)

    def probe(version: str) -> Verdict:
        key = CellKey(fixture, version, subject, check, under_test.label)
        session = Session(current().but(fault=fault))
        with tempfile.TemporaryDirectory() as logs:
            session.in_workers([key], Path(logs), vllms={under_test.label: under_test})
        return session.verdicts[0]

    return probe


def bisect(versions: list[str], probe: Callable[[str], Verdict],
           log: Callable[[str], None] = print) -> BisectResult:
    """`versions[0]` must be good and `versions[-1]` bad; returns the first bad release."""
    result = BisectResult(None, None)

    def bad(index: int) -> bool:
        version = versions[index]
        if version not in result.verdicts:
            result.verdicts[version] = probe(version)
            log(f"  transformers {version}: {result.verdicts[version].status}")
        return result.verdicts[version].status in BAD

    if bad(0):
        raise ValueError(f"the cell is already bad on the good version {versions[0]}: "
                         f"{result.verdicts[versions[0]].detail[:300]}")
    if not bad(len(versions) - 1):
        raise ValueError(f"the cell is not bad on the bad version {versions[-1]}")
    low, high = 0, len(versions) - 1  # low good, high bad
    while high - low > 1:
        middle = (low + high) // 2
        if bad(middle):
            high = middle
        else:
            low = middle
    result.first_bad, result.last_good = versions[high], versions[low]
    return result
