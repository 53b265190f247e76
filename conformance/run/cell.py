"""The cell runner: one cell (fixture x vLLM x transformers version x subject x check), run in
this process, for every command.

`conformance run` and `bisect` hand their cells to workers (`run/workers.py`), each of which
runs them here (`run/worker.py`); `check` runs one checkpoint's cells here in its own process
(`run_here`). A checkpoint-level check runs once on the fixture's fixed inputs (vLLM's backend
against native vLLM); a case-level check drives a subject over hypothesis-generated cases
(`run/suite.py`). Either way the judge (`results/judge.py`) decides the verdict, for the key
the cell was given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from pathlib import Path

from hypothesis import settings as profiles

from conformance.checks import get_check
from conformance.checks.contract import Check, NotApplicable
from conformance.core.settings import current
from conformance.core.vllms import current_label, unsupported
from conformance.inputs import strategies  # noqa: F401 - registers the hypothesis profiles
from conformance.results.judge import Failure, judge
from conformance.results.verdict import CellKey, Verdict
from conformance.run.logs import as_error, in_process
from conformance.run.plan import Cell
from conformance.run.suite import REPRO_DIR, exception_text, run_suite
from conformance.run.versions import installed_transformers
from conformance.subjects import plants_faults
from conformance.subjects.context import fixture_path
from conformance.subjects.faults import Fault, planted
from conformance.subjects.kernels import probe as probe_kernels
from conformance.subjects.vllm import engine_unavailable
from fixtures.recipe import Recipe
from fixtures.variants import get_recipe


def model_options() -> dict[str, str]:
    """Where and in what precision the model checks run: `conformance run --device/--dtype`."""
    return {"device": current().device, "dtype": current().dtype}


def run_cell(cell: Cell, repro_dir: Path | None = None) -> Verdict:
    """`repro_dir`: where a suite's reproducers go (a run's: its folder's repro/; None: the
    repository's reports/repro/). A checkpoint's cell (`check`) writes none: a reproducer
    replays a fixture's case, and `check` writes standalone ones from the verdicts."""
    key, started = cell.key, time.monotonic()
    if key.version != (installed := installed_transformers()):
        return Verdict.of(key, "error", f"worker runs transformers {installed}, not {key.version}")
    if key.vllm != current_label():
        return Verdict.of(key, "error", f"worker runs vLLM {current_label()}, not {key.vllm}")
    if cell.checkpoint is not None:  # the contributor's: run whatever the windows say
        recipe, check = cell.checkpoint.recipe, get_check(key.check)
        path: str | None = cell.checkpoint.path
    else:
        refused = fixture_refusal(key)
        if isinstance(refused, Verdict):
            return refused
        (recipe, check), path = refused, None
    if check.level == "case":
        try:
            with planted_around_cell(cell.fault, key.subject):
                return run_suite(
                    key, fault=cell.fault if plants_faults(key.subject) else None,
                    repro_dir=None if cell.checkpoint else (repro_dir or REPRO_DIR),
                    path=path, recipe=recipe)
        except Exception as error:
            return as_error(Verdict.of(key, "error", exception_text(error),
                                       time.monotonic() - started), error)
    # a finding was measured on its fixture: another checkpoint not showing it says nothing
    exhaustive = None if path is None else False
    return run_checkpoint(key, recipe, check, lambda: path or fixture_path(recipe.name),
                          cell.fault, started, exhaustive=exhaustive)


def fixture_refusal(key: CellKey) -> Verdict | tuple[Recipe, Check]:
    """The cell's verdict where its fixture cannot run on its versions (an unknown fixture or
    check, a transformers version below its vLLM's window or outside the architecture's),
    else its recipe and check."""
    if reason := unsupported(key.vllm, key.version):
        return Verdict.of(key, "n/a", reason)
    try:
        recipe, check = get_recipe(key.fixture), get_check(key.check)
    except KeyError as error:
        return Verdict.of(key, "error", str(error).strip('"'))
    if not recipe.supports(key.version):
        reason = f": {recipe.version_reason}" if recipe.version_reason else ""
        return Verdict.of(key, "n/a", f"{recipe.architecture} not in transformers {key.version}"
                                      + reason)
    return recipe, check


def run_here(cells: Iterable[Cell], folder: Path | None,
             on_verdict: Callable[[Verdict], None] = lambda verdict: None) -> list[Verdict]:
    """Cells run one after another in this process (`check`), under its settings (`use`) and
    their hypothesis profile, as a worker runs its cells; each cell's output captured, and
    kept in its log under `folder` where the cell is bad (`logs.in_process`). `on_verdict`
    sees each verdict as it comes (`check`: whose problem a failure is, and its line)."""
    profiles.load_profile(current().profile)
    verdicts = []
    for cell in cells:
        verdict = in_process(folder, partial(run_cell, cell))
        on_verdict(verdict)
        verdicts.append(verdict)
    return verdicts


def planted_around_cell(fault: Fault | None, subject: str) -> AbstractContextManager[None]:
    """A fault its subject does not plant itself (vLLM's backend patched: its processors and
    models are made within the cell) is planted around the whole cell; a media fault is the
    checkpoint-level checks' own hook (`Fault.media`)."""
    return nullcontext() if fault is None or plants_faults(subject) else planted(fault)


def run_checkpoint(key: CellKey, recipe: Recipe, check: Check, locate: Callable[[], str],
                   fault: Fault | None = None, started: float | None = None, *,
                   exhaustive: bool | None = None) -> Verdict:
    """A checkpoint-level cell on the checkpoint `locate()` gives (built or found lazily: its
    failure is the cell's verdict). `exhaustive=False`: a known finding that does not show is
    no stale finding (a checkpoint other than the fixture the finding was measured on)."""
    started = time.monotonic() if started is None else started
    if check.loads_model and (reason := engine_unavailable(current().device)):
        return Verdict.of(key, "n/a", reason, time.monotonic() - started)
    try:
        path = locate()
        with planted_around_cell(fault, key.subject):
            outcome = check.run(recipe, path, subject_media=fault.media if fault else None,
                                **model_options())
    except NotApplicable as reason:
        return Verdict.of(key, "n/a", str(reason), time.monotonic() - started)
    except Exception as error:  # a cell's error is its verdict, never the run's end
        return as_error(judge(key, [Failure(exception_text(error), error=True)],
                              exhaustive=False, seconds=time.monotonic() - started), error)
    # each difference judged on its own: a known one hides no other
    failures = [Failure(difference, outcome.options.get(difference, ()),
                        input=outcome.inputs.get(difference, ""))
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
