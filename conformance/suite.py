"""One suite cell: a check over hypothesis-generated cases for one fixture and subject.

A failure shrinks to a minimal case, becomes a standalone reproducer under reports/repro/,
and is `xfail` only where expectations.py lists the exact disagreement.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass

from hypothesis import given, reject, settings
from hypothesis.errors import Unsatisfiable

from conformance.cases import Case
from conformance.checks import get_check
from conformance.checks.base import OracleFailed
from conformance.context import make_context
from conformance.expectations import known_reason
from conformance.isolation import processor_defaults_restored
from conformance.paths import REPORTS_DIR
from conformance.strategies import cases

REPRO_DIR = REPORTS_DIR / "repro"


@dataclass
class SuiteResult:
    status: str  # pass | fail | xfail | error (a known disagreement may go unhit: pass)
    evidence: str = ""
    case: Case | None = None
    reproducer: str | None = None
    examples: int = 0
    seconds: float = 0.0
    oracle_failures: int = 0  # valid cases an oracle could not process (discarded)
    oracle_note: str = ""  # the first such failure


class CheckFailed(AssertionError):
    pass


def run_suite(fixture: str, subject: str, check: str, *, fault: str | None = None,
              max_examples: int | None = None, repro_dir=REPRO_DIR, path: str | None = None,
              recipe=None) -> SuiteResult:
    import transformers

    version = transformers.__version__
    started = time.monotonic()
    module = get_check(check)
    try:  # setting up is not the check: its failure is an error, not a finding
        ctx = make_context(fixture, subject, fault, path=path, recipe=recipe)
        for party in (ctx.subject, *ctx.oracles.values()):
            _ = party.processor
    except Exception as error:
        message = "".join(traceback.format_exception_only(type(error), error)).strip()
        known = known_reason(fixture, check, version, subject, observed=message)
        if known:
            return SuiteResult("xfail", f"{known.reason} [observed at setup: {message}]",
                               seconds=time.monotonic() - started)
        return SuiteResult("error", f"setup: {message}", seconds=time.monotonic() - started)
    failures: dict[str, Case] = {}  # evidence -> the latest (finally: minimal) case
    count = [0]
    oracle_failures: list[str] = []

    def attempt(case: Case) -> None:
        count[0] += 1
        try:
            with processor_defaults_restored():
                outcome = module.run(ctx, case)
        except OracleFailed as error:
            oracle_failures.append(f"{error} on {case.describe()}")
            reject()
        except Exception as error:  # the subject crashed on this case
            evidence = "raised " + "".join(
                traceback.format_exception_only(type(error), error)).strip()
            failures[evidence] = case
            raise CheckFailed(evidence) from error
        if not outcome.ok:
            failures[outcome.evidence] = case
            raise CheckFailed(outcome.evidence)

    overrides = {} if max_examples is None else {"max_examples": max_examples}
    found: list[str] = []
    # The architecture's default options first, so a finding behind one of its options (drawn
    # in the second pass) never hides a regression on the path most deployments take.
    passes = [False, True] if ctx.recipe.extra.get("processor_options") else [False]
    try:
        for with_options in passes:
            found = search(settings(**overrides)(
                given(cases(ctx.recipe, with_options=with_options))(attempt)))
            if found:
                break
    except Unsatisfiable:
        why = "every generated case was discarded: " + (
            oracle_failures[0] if oracle_failures else "no valid case")
        known = known_reason(fixture, check, version, subject, observed=why)
        return SuiteResult("xfail" if known else "error",
                           f"{known.reason} [observed: {why}]" if known else why,
                           examples=count[0], seconds=time.monotonic() - started,
                           oracle_failures=len(oracle_failures))
    seconds = time.monotonic() - started
    note = oracle_failures[0] if oracle_failures else ""
    if not found:
        return SuiteResult("pass", examples=count[0], seconds=seconds,
                           oracle_failures=len(oracle_failures), oracle_note=note)

    def options_of(evidence: str) -> tuple[str, ...]:
        return tuple(name for name, _ in failures[evidence].processor_kwargs)

    def known_for(evidence: str):
        return known_reason(fixture, check, version, subject, evidence, options_of(evidence))

    unknown = [e for e in found if not known_for(e)]
    evidence = (unknown or found)[0]
    case = failures[evidence]
    path = write_reproducer(check, subject, fault, case, version, evidence, repro_dir)
    status = "fail" if unknown else "xfail"
    known = known_for(evidence)
    detail = evidence if unknown else f"{known.reason} [observed: {evidence}]"
    if case.processor_kwargs:
        detail += " (with " + ", ".join(f"{k}={v!r}" for k, v in case.processor_kwargs) + ")"
    if len(found) > 1:
        detail += f" (+{len(found) - 1} other distinct failure(s))"
    return SuiteResult(status, detail, case, str(path), count[0], seconds,
                       len(oracle_failures), note)


def search(test) -> list[str]:
    """Run one hypothesis search; the evidence of each distinct (shrunk) failure."""
    try:
        test()
    except CheckFailed as error:
        return [str(error)]
    except ExceptionGroup as group:  # several distinct failures, each shrunk
        found = [str(e) for e in group.exceptions if isinstance(e, CheckFailed)]
        if len(found) != len(group.exceptions):
            raise
        return found
    return []


def write_reproducer(check, subject, fault, case, version, evidence, repro_dir):
    from conformance.repro import write_reproducer as write

    return write(repro_dir, check=check, subject=subject, fault=fault, case=case,
                 version=version, evidence=evidence)
