"""The findings' examples (conformance/inputs/examples.toml): every finding of the case-level
checks is exercised by an example, whatever a run draws, or says why it cannot be; each
example is a valid case of its fixture and shows its findings where they apply."""

from __future__ import annotations

import pytest
import transformers

from conformance import expectations
from conformance.checks import check_ids
from conformance.inputs import examples
from fixtures.registry import RECIPE_MODULES, get_recipe

SUITE_CHECKS = set(check_ids("case"))


def suite_findings() -> list[expectations.Finding]:
    """The findings with evidence for a case-level check, or for any check."""
    return [f for f in expectations.load()
            if set(f.checks) & (SUITE_CHECKS | {expectations.ANY})]  # "check@fixture" keys too


def covers(finding: expectations.Finding, fixture: str) -> bool:
    return expectations.ANY in finding.fixtures or fixture in finding.fixtures


def test_every_suite_finding_has_an_example_or_a_reason():
    loaded = examples.load()
    missing = []
    for finding in suite_findings():
        shown = [e for e in loaded.examples
                 if finding.id in e.findings and covers(finding, e.case.fixture)]
        if not shown and not loaded.reasons.get(finding.id):
            missing.append(finding.id)
        assert not (shown and finding.id in loaded.reasons), \
            f"{finding.id}: has an example and a reason for having none"
    assert not missing, f"no example and no reason for: {', '.join(missing)}"
    known = {f.id for f in suite_findings()}
    assert set(loaded.reasons) <= known, set(loaded.reasons) - known


@pytest.mark.parametrize("example", examples.load().examples,
                         ids=lambda e: f"{e.case.fixture}:{e.findings[0]}")
def test_each_example_is_a_case_of_its_fixture_and_names_its_findings(example):
    case = example.case
    assert case.fixture in RECIPE_MODULES
    recipe = get_recipe(case.fixture)
    assert case.modality in (*recipe.modalities, "video")
    assert len(case.segments) == len(case.media) + 1 <= recipe.max_items + 1
    assert all(m.modality == case.modality for m in case.media)
    if case.processor_kwargs:  # one of the recipe's option sets, whole, as the search draws it
        assert case.processor_kwargs in [tuple(sorted(o.items()))
                                         for o in recipe.processor_options]
    assert example.findings and example.why
    for finding_id in example.findings:
        finding = expectations.get(finding_id)
        assert finding in suite_findings(), f"{finding_id}: no case-level evidence"
        assert covers(finding, case.fixture), f"{finding_id} does not cover {case.fixture}"
        assert set(finding.options_on(case.fixture)) <= set(example.options), \
            f"{finding_id} needs the options {finding.options_on(case.fixture)}"


def test_each_search_runs_the_examples_of_its_options():
    gemma3 = get_recipe("gemma3")
    default = examples.for_search(gemma3, False, False)
    with_options = examples.for_search(gemma3, True, False)
    assert default and all(not c.processor_kwargs for c in default)
    assert with_options and all(c.processor_kwargs for c in with_options)
    assert examples.for_search(get_recipe("llava"), True, False) == ()


@pytest.mark.vllm
def test_each_example_shows_its_findings_where_they_apply():
    """On the installed transformers: each finding an example names that applies here (to one
    of the case-level checks, for a suite subject) is shown by the example in at least one of
    them, as the suite judges it."""
    from conformance.checks import get_check
    from conformance.core.vllms import current_label
    from conformance.run.suite import exception_text
    from conformance.subjects.context import OracleFailed, make_context
    from conformance.subjects.isolation import processor_defaults_restored

    version, vllm = transformers.__version__, current_label()
    unshown = []
    for example in examples.load().examples:
        case, options = example.case, example.options
        wanted = {f: expectations.get(f) for f in example.findings}
        shown: set[str] = set()
        applies: set[str] = set()
        for subject in ("impl", "vllm-backend"):
            try:
                ctx = make_context(case.fixture, subject)
                for party in (ctx.subject, *ctx.oracles.values()):
                    # built before any case, as run_suite builds them: one first built inside
                    # a case with options would keep what they set (transformers' defaults)
                    _ = party.processor
            except Exception:  # the suite's set-up error, no case runs (a whole-cell finding)
                continue
            for check in sorted(SUITE_CHECKS):
                here = [f for f, finding in wanted.items()
                        if finding.applies(case.fixture, check, version, subject, options, vllm)]
                if not here:
                    continue
                applies |= set(here)
                try:
                    with processor_defaults_restored():
                        differences = get_check(check).run(ctx, case).differences
                except OracleFailed:
                    continue  # the suite rejects the case: another check must show it
                except Exception as error:  # the subject crashed: evidence, as the suite says it
                    differences = ("raised " + exception_text(error),)
                shown |= {f for f in here
                          if any(wanted[f].shown_by(check, d) for d in differences)}
        unshown += [f"{case.fixture}: {f}" for f in sorted(applies - shown)]
    assert not unshown, f"examples not showing their findings on {version}: {unshown}"
