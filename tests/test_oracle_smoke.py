"""Oracle smoke: native vLLM and the Transformers backend agree on every fixture.

Processing runs on each version vLLM 0.31.0 accepts plus one beyond its pin, each version in
its own worker process (its transformers overlay on PYTHONPATH). A disagreement that is a real
finding is in conformance/expectations/findings.toml and shows up here as xfail with its reason.

Every selected test's cell runs on first use, through the matrix runner as `conformance run`
runs them: one worker per version (the processing and model cells of 5.17.0 share one, so its
engines and imports are paid once), two workers side by side on their own cores, rather
than one worker per test, which would pay a worker's start each time.
"""

import os

import pytest

from conformance.results.verdict import CellKey, Verdict
from conformance.run.matrix import run_cells
from conformance.run.plan import CHECKPOINT_SUBJECT as SMOKE_SUBJECT
from conformance.run.versions import DEFAULT_VERSIONS, in_vllm_window
from fixtures.registry import available_recipes

pytestmark = [pytest.mark.vllm, pytest.mark.matrix]  # the main job judges these cells

FIXTURES = available_recipes()
PROCESSING_VERSIONS = [v for v in DEFAULT_VERSIONS if in_vllm_window(v)] + [
    next(v for v in DEFAULT_VERSIONS if not in_vllm_window(v))]
MODEL_VERSIONS = ["5.17.0"]

_results: dict[CellKey, Verdict] = {}


CHECKS = {"test_native_and_backend_processing_agree": "processing",
          "test_native_and_backend_pick_the_same_greedy_token": "model"}


def selected_cells(request) -> list[CellKey]:
    """The cells of this module's tests that pytest selected (`-k`, markers)."""
    keys = []
    for item in request.session.items:
        check = CHECKS.get(getattr(item, "originalname", ""))
        if check and item.module is request.module:
            params = item.callspec.params
            keys.append(CellKey(params["fixture"], params["version"], SMOKE_SUBJECT, check))
    return keys


def cell(request, tmp_path_factory, fixture: str, version: str, check: str) -> Verdict:
    key = CellKey(fixture, version, SMOKE_SUBJECT, check)
    if key not in _results:
        wanted = [k for k in selected_cells(request) if k not in _results] or [key]
        run_cells(wanted, tmp_path_factory.mktemp("smoke-logs"), _record,
                  jobs=min(2, len(os.sched_getaffinity(0))))
    return _results[key]


def _record(verdict: Verdict) -> None:
    _results[verdict.key] = verdict


def assert_verdict(verdict: Verdict) -> None:
    if verdict.status == "xfail":
        pytest.xfail(verdict.finding)  # the finding id: one line in the summary
    if verdict.status == "n/a":
        pytest.skip(verdict.detail)
    assert verdict.status == "pass", f"{verdict.status}: {verdict.detail}"


@pytest.mark.parametrize("version", PROCESSING_VERSIONS)
@pytest.mark.parametrize("fixture", FIXTURES)
def test_native_and_backend_processing_agree(request, tmp_path_factory, fixture, version):
    assert_verdict(cell(request, tmp_path_factory, fixture, version, "processing"))


@pytest.mark.model
@pytest.mark.parametrize("version", MODEL_VERSIONS)
@pytest.mark.parametrize("fixture", FIXTURES)
def test_native_and_backend_pick_the_same_greedy_token(request, tmp_path_factory, fixture,
                                                       version):
    assert_verdict(cell(request, tmp_path_factory, fixture, version, "model"))
