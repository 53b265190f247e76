"""The property suites: fixture x subject x case-level check on the installed transformers.

Each cell drives one check over hypothesis-generated cases (profile from
$CONFORMANCE_HYPOTHESIS_PROFILE: dev, ci or nightly). A failure shrinks, is written as a
reproducer under reports/repro/, and is xfail only where a known finding names it exactly.
Run on another version with `conformance exec --transformers 5.12.1 -- python -m pytest ...`.
"""

import pytest

from conformance.checks import check_ids
from conformance.run.plan import key_here
from conformance.run.suite import run_suite
from conformance.subjects import SUBJECTS
from fixtures.registry import available_recipes

pytestmark = [pytest.mark.vllm, pytest.mark.matrix]  # the main job judges these cells


@pytest.mark.parametrize("check", check_ids("case"))
@pytest.mark.parametrize("subject", SUBJECTS)
@pytest.mark.parametrize("fixture", available_recipes())
def test_subject_conforms(fixture, subject, check):
    verdict = run_suite(key_here(fixture, subject, check))
    if verdict.status == "xfail":
        pytest.xfail(verdict.finding)  # the finding id: one line in the summary
    assert verdict.status == "pass", (
        f"{verdict.status}: {verdict.detail}\nreproducer: {verdict.data.get('reproducer')}")
