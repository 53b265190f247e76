"""The binary search over releases, with a fake probe: every first bad release is found with
as few probes as a binary search needs, and bad endpoints are refused with a clear message.
(tests/test_cli.py runs it end to end: real workers on real releases, a planted fault.)"""

from __future__ import annotations

import math

import pytest

from conformance.results.verdict import Verdict
from conformance.run.bisect import bisect

RELEASES = [f"5.{minor}.{patch}" for minor in range(12, 18) for patch in (0, 1)]


def probe_failing_from(first_bad: str | None, probed: list[str]):
    def probe(version: str) -> Verdict:
        probed.append(version)
        bad = first_bad is not None and RELEASES.index(version) >= RELEASES.index(first_bad)
        return Verdict("llava", version, "placeholders", "fail" if bad else "pass",
                       "ranges differ" if bad else "")

    return probe


@pytest.mark.parametrize("first_bad", RELEASES[1:])
def test_bisect_finds_every_first_bad_release_in_log2_probes(first_bad):
    probed: list[str] = []
    found = bisect(RELEASES, probe_failing_from(first_bad, probed), log=lambda _: None)
    index = RELEASES.index(first_bad)
    assert (found.first_bad, found.last_good) == (first_bad, RELEASES[index - 1])
    assert len(probed) == len(set(probed)) <= 2 + math.ceil(math.log2(len(RELEASES) - 1))
    assert found.verdicts[first_bad].status == "fail"


def test_bisect_refuses_endpoints_that_are_not_good_then_bad():
    with pytest.raises(ValueError, match="already bad on the good version 5.12.0"):
        bisect(RELEASES, probe_failing_from("5.12.0", []), log=lambda _: None)
    with pytest.raises(ValueError, match="not bad on the bad version 5.17.1"):
        bisect(RELEASES, probe_failing_from(None, []), log=lambda _: None)
