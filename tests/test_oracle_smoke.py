"""Oracle smoke: native vLLM and the Transformers backend agree on every fixture.

Processing runs on each version vLLM 0.31.0 accepts plus one beyond its pin, each version in
its own worker process (its transformers overlay on PYTHONPATH). A disagreement that is a real
finding is in conformance/expectations/findings.toml and shows up here as xfail with its reason.
"""

from pathlib import Path

import pytest

from conformance.results.verdict import CellKey, Verdict
from conformance.run.matrix import run_version
from conformance.run.plan import CHECKPOINT_SUBJECT as SMOKE_SUBJECT
from conformance.run.versions import DEFAULT_VERSIONS, in_vllm_window
from fixtures.registry import available_recipes

pytestmark = pytest.mark.vllm

FIXTURES = available_recipes()
PROCESSING_VERSIONS = [v for v in DEFAULT_VERSIONS if in_vllm_window(v)] + [
    next(v for v in DEFAULT_VERSIONS if not in_vllm_window(v))]
MODEL_VERSIONS = ["5.17.0"]

_results: dict[tuple[str, str], dict[CellKey, Verdict]] = {}


def cell(tmp_path_factory, fixture: str, version: str, check: str) -> Verdict:
    """All fixtures of one (version, check) run in one worker, on first use."""
    if (version, check) not in _results:
        got: dict = {}
        log_dir: Path = tmp_path_factory.mktemp(f"logs-{version}-{check}")
        cells = [CellKey(f, version, SMOKE_SUBJECT, check) for f in FIXTURES]
        run_version(version, cells, log_dir, lambda v: got.__setitem__(v.key, v))
        _results[(version, check)] = got
    return _results[(version, check)][CellKey(fixture, version, SMOKE_SUBJECT, check)]


def assert_verdict(verdict: Verdict) -> None:
    if verdict.status == "xfail":
        pytest.xfail(verdict.detail)
    if verdict.status == "n/a":
        pytest.skip(verdict.detail)
    assert verdict.status == "pass", f"{verdict.status}: {verdict.detail}"


@pytest.mark.parametrize("version", PROCESSING_VERSIONS)
@pytest.mark.parametrize("fixture", FIXTURES)
def test_native_and_backend_processing_agree(tmp_path_factory, fixture, version):
    assert_verdict(cell(tmp_path_factory, fixture, version, "processing"))


@pytest.mark.model
@pytest.mark.parametrize("version", MODEL_VERSIONS)
@pytest.mark.parametrize("fixture", FIXTURES)
def test_native_and_backend_pick_the_same_greedy_token(tmp_path_factory, fixture, version):
    assert_verdict(cell(tmp_path_factory, fixture, version, "model"))
