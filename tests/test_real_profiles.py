"""The `real` profiles: the mirrored checkpoints' processor geometry with tiny weights, so token
counts per item, tiling and padding are what users see. Slower: `pytest -m slow`."""

import pytest
import transformers

from conformance.checks.processing import run_cell
from fixtures.build import build_fixture
from fixtures.registry import available_recipes, get_recipe

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


@pytest.mark.parametrize("name", available_recipes())
def test_every_recipe_has_a_real_profile(name):
    assert "real" in get_recipe(name).profiles


@pytest.mark.parametrize("name", [n for n in available_recipes()
                                  if "real" in get_recipe(n).profiles])
def test_real_profile_native_and_backend_processing_agree(name):
    """The `processing` cell on the real profile: pass, or xfail with a known reason."""
    verdict = run_cell(get_recipe(name), "processing", transformers.__version__,
                       lambda fixture: str(build_fixture(fixture, "real")))
    if verdict.status == "n/a":
        pytest.skip(verdict.detail)
    if verdict.status == "xfail":
        pytest.xfail(verdict.detail)
    assert verdict.status == "pass", verdict.detail
