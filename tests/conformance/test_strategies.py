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



def drawn_cases(recipe, rate: int) -> list:
    """A few cases the suites would draw for `recipe` with audio at `rate` Hz."""
    from hypothesis import given, settings

    from conformance.inputs.strategies import cases

    drawn = []

    @settings(max_examples=3, database=None)
    @given(cases(recipe, rate=rate))
    def collect(case) -> None:
        drawn.append(case)

    collect()
    return drawn


def test_audio_is_made_at_the_rate_its_checkpoint_takes():
    """vLLM's resampling is not under test: a 24 kHz checkpoint (VibeVoice ASR) is given 24 kHz
    audio, a 16 kHz one (Qwen2-Audio) 16 kHz, and a case keeps its rate through JSON."""
    from conformance.inputs.cases import Case
    from conformance.inputs.media import audio_rate
    from fixtures.build import build_fixture
    from fixtures.registry import get_recipe

    rates = {}
    for name in ("vibevoice_asr", "qwen2_audio"):
        recipe = get_recipe(name)
        rate = rates[name] = audio_rate(recipe, str(build_fixture(name)))
        for case in drawn_cases(recipe, rate):
            assert {given for _, given in case.mm_data()["audio"]} == {rate}
            assert Case.from_json(case.to_json()) == case
    assert rates == {"vibevoice_asr": 24000, "qwen2_audio": 16000}
