"""The property suites: fixture x subject x check on the installed transformers version.

Each cell drives one check over hypothesis-generated cases (profile from
$CONFORMANCE_HYPOTHESIS_PROFILE: dev, ci or nightly). A failure shrinks, is written as a
reproducer under reports/repro/, and is xfail only where expectations.py names it exactly.
Run on another version with `conformance exec --transformers 5.12.1 -- python -m pytest ...`.
"""

import pytest

from conformance.checks import CHECK_IDS
from conformance.subjects import SUBJECTS
from conformance.run.suite import run_suite
from fixtures.registry import available_recipes

pytestmark = pytest.mark.vllm


@pytest.mark.parametrize("check", CHECK_IDS)
@pytest.mark.parametrize("subject", SUBJECTS)
@pytest.mark.parametrize("fixture", available_recipes())
def test_subject_conforms(fixture, subject, check):
    result = run_suite(fixture, subject, check)
    if result.status == "xfail":
        pytest.xfail(result.evidence)
    assert result.status == "pass", (
        f"{result.status}: {result.evidence}\nreproducer: {result.reproducer}")
