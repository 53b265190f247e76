"""The `real` profiles: the mirrored checkpoints' processor geometry with tiny weights, so token
counts per item, tiling and padding are what users see. Slower: `pytest -m slow`."""

import pytest
import transformers

from conformance.checks import get_check
from conformance.results.verdict import CellKey
from conformance.run.cell import run_checkpoint
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
    key = CellKey(name, transformers.__version__, "vllm-backend", "processing")
    verdict = run_checkpoint(key, get_recipe(name), get_check("processing"),
                             lambda: str(build_fixture(name, "real")))
    if verdict.status == "n/a":
        pytest.skip(verdict.detail)
    if verdict.status == "xfail":
        pytest.xfail(verdict.finding)  # the finding id: one line in the summary
    assert verdict.status == "pass", verdict.detail
