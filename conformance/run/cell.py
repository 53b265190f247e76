"""Run one cell (fixture x vLLM x transformers version x subject x check) in-process.

A checkpoint-level check runs once on the fixture's fixed inputs (vLLM's backend against native
vLLM); a case-level check drives a subject over hypothesis-generated cases (`run/suite.py`).
Either way the judge (`results/judge.py`) decides the verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from conformance.checks import get_check
from conformance.checks.contract import Check, NotApplicable
from conformance.core.settings import current
from conformance.results.judge import Failure, judge
from conformance.results.verdict import CellKey, Verdict
from conformance.run.logs import as_error
from conformance.subjects import plants_faults
from conformance.subjects.faults import media_fault, planted, routed
from conformance.subjects.kernels import probe as probe_kernels
from conformance.subjects.vllm import engine_unavailable


def model_options() -> dict[str, str]:
    """Where and in what precision the model checks run: `conformance run --device/--dtype`."""
    return {"device": current().device, "dtype": current().dtype}


def planted_fault(key: CellKey) -> str | None:
    """A fault planted on purpose (the run's settings: bisect's demonstration, the fault
    proofs): it reaches only the cells of the subject it targets (`faults.target`)."""
    return routed(current().fault, key.subject)


def run_cell(key: CellKey, path_of: Callable[[str], str] | None = None,
             repro_dir: Path | None = None) -> Verdict:
    """`repro_dir`: where a suite's reproducers go (a run's: its folder's repro/)."""
    import transformers

    started = time.monotonic()
    if key.version != transformers.__version__:
        return Verdict.of(key, "error",
                          f"worker runs transformers {transformers.__version__}, not {key.version}")
    from conformance.core.vllms import current_label, unsupported

    if key.vllm != current_label():
        return Verdict.of(key, "error", f"worker runs vLLM {current_label()}, not {key.vllm}")
    if reason := unsupported(key.vllm, key.version):
        return Verdict.of(key, "n/a", reason)
    try:
        from fixtures.variants import get_recipe

        recipe = get_recipe(key.fixture)
        check = get_check(key.check)
    except KeyError as error:
        return Verdict.of(key, "error", str(error).strip('"'))
    if not recipe.supports(key.version):
        reason = f": {recipe.version_reason}" if recipe.version_reason else ""
        return Verdict.of(key, "n/a", f"{recipe.architecture} not in transformers {key.version}"
                                      + reason)
    fault = planted_fault(key)
    if check.level == "case":
        from conformance.run.suite import exception_text, run_suite

        try:
            fault_for_subject = fault if plants_faults(key.subject) else None
            with planted_around_cell(fault, key.subject):
                return run_suite(key.fixture, key.subject, key.check, fault=fault_for_subject,
                                 **({"repro_dir": repro_dir} if repro_dir else {}))
        except Exception as error:
            return as_error(Verdict.of(key, "error", exception_text(error),
                                       time.monotonic() - started), error)
    from conformance.subjects.context import fixture_path

    return run_checkpoint(key, recipe, check, lambda: (path_of or fixture_path)(recipe.name),
                          fault, started)


def planted_around_cell(fault: str | None, subject: str) -> AbstractContextManager[None]:
    """A fault its subject does not plant itself (vLLM's backend patched: its processors and
    models are made within the cell) is planted around the whole cell; a media fault is the
    checkpoint-level checks' own hook (`media_fault`)."""
    return nullcontext() if fault is None or plants_faults(subject) else planted(fault)


def run_checkpoint(key: CellKey, recipe, check: Check, locate: Callable[[], str],
                   fault: str | None = None, started: float | None = None, *,
                   exhaustive: bool | None = None) -> Verdict:
    """A checkpoint-level cell on the checkpoint `locate()` gives (built or found lazily: its
    failure is the cell's verdict). `exhaustive=False`: a known finding that does not show is
    no stale finding (a checkpoint other than the fixture the finding was measured on)."""
    from conformance.run.suite import exception_text

    started = time.monotonic() if started is None else started
    if check.loads_model and (reason := engine_unavailable(current().device)):
        return Verdict.of(key, "n/a", reason, time.monotonic() - started)
    try:
        path = locate()
        with planted_around_cell(fault, key.subject):
            outcome = check.run(recipe, path, subject_media=media_fault(fault),
                                **model_options())
    except NotApplicable as reason:
        return Verdict.of(key, "n/a", str(reason), time.monotonic() - started)
    except Exception as error:  # a cell's error is its verdict, never the run's end
        return as_error(judge(key, [Failure(exception_text(error), error=True)],
                              exhaustive=False, seconds=time.monotonic() - started), error)
    # each difference judged on its own: a known one hides no other
    failures = [Failure(difference, outcome.options.get(difference, ()))
                for difference in outcome.differences]
    return judge(key, failures, seconds=time.monotonic() - started,
                 data={**outcome.measured, **kernels_ran_on(check)},
                 exhaustive=check.exhaustive if exhaustive is None else exhaustive)


def kernels_ran_on(check: Check) -> dict[str, str]:
    """A model cell on the CPU names the kernel build its engines ran on (vLLM picks it by
    the CPU: `subjects/kernels.py`), so that a verdict seen on one machine and not on another
    can be traced to it."""
    if not check.loads_model or current().device != "cpu":
        return {}
    found = probe_kernels()
    if not found.build:
        return {}
    return {"kernels": f"{found.build} ({found.cpu})", **({"runner": found.runner}
                                                          if found.runner else {})}
