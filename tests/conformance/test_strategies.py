"""The cases a search draws depend on the strategies and the seed only, not on which of our
modules are loaded (hypothesis would otherwise draw literals from their source)."""

import subprocess
import sys

SCRIPT = """
import hashlib, importlib, sys
from hypothesis import given, seed, settings
from conformance.inputs.strategies import cases
from conformance.run.suite import SEARCH_SEED
from fixtures.registry import RECIPE_MODULES, get_recipe
if sys.argv[1] == "all":
    for name in RECIPE_MODULES:
        importlib.import_module(f"fixtures.recipes.{name}")
    importlib.import_module("conformance.cli")
drawn = []
@settings(max_examples=20, database=None)
@seed(SEARCH_SEED)
@given(cases(get_recipe("paligemma")))
def collect(case):
    drawn.append(case.to_json())
collect()
print(len(drawn), hashlib.sha256("".join(drawn).encode()).hexdigest())
"""


def test_draws_do_not_depend_on_the_modules_loaded():
    runs = [subprocess.run([sys.executable, "-c", SCRIPT, which], capture_output=True,
                           text=True, check=True).stdout for which in ("few", "all")]
    assert runs[0] == runs[1] and runs[0].startswith("20 ")
