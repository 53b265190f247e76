"""A case's processor options must not become the next case's defaults (see isolation.py)."""

from __future__ import annotations

import subprocess
import sys
import types

from conformance.subjects.context import fixture_path
from conformance.subjects.isolation import processor_defaults_restored


def test_defaults_mutated_inside_are_restored(monkeypatch):
    module = types.ModuleType("transformers._planted_processing")

    class PlantedProcessorKwargs:
        _defaults = {"images_kwargs": {"crop_to_patches": True}}

    module.PlantedProcessorKwargs = PlantedProcessorKwargs
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with processor_defaults_restored():
        PlantedProcessorKwargs._defaults["images_kwargs"].update(crop_to_patches=False)
    assert PlantedProcessorKwargs._defaults == {"images_kwargs": {"crop_to_patches": True}}


def test_aya_vision_counting_leak_is_contained():
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(fixture_path("aya_vision"))
    image = Image.new("RGB", (173, 360))

    def tokens() -> int:
        return len(processor(text="<image>", images=[image])["input_ids"][0])

    default = tokens()
    with processor_defaults_restored():
        processor._get_num_multimodal_tokens(image_sizes=[[360, 173]], crop_to_patches=False)
    assert tokens() == default


# In a process of its own (the subjects memoise what they processed: a suite run before in this
# process would recall its outputs instead of calling the processors again): aya_vision's
# prompt-ids suite on impl, whose drawn cases set `crop_to_patches`, which Aya Vision's count
# helper writes into its options class's defaults (impl counts as the backend does:
# backend-scoped-options-written-into-defaults). It prints the classes whose defaults changed.
SUITE_IN_A_PROCESS = """
import contextlib, copy, sys
from transformers import AutoProcessor
from conformance.run import suite
from conformance.run.plan import key_here
from conformance.subjects.context import fixture_path
from conformance.subjects.isolation import processor_kwargs_classes

def defaults():
    return {c.__qualname__: copy.deepcopy(vars(c)["_defaults"]) for c in processor_kwargs_classes()}

AutoProcessor.from_pretrained(fixture_path("aya_vision"))
before = defaults()
if sys.argv[1] == "planted":
    suite.processor_defaults_restored = contextlib.nullcontext
verdict = suite.run_suite(key_here("aya_vision", "impl", "prompt-ids"), max_examples=25,
                          repro_dir=None)
assert verdict.data["compared_by_pass"]["drawn"], verdict.data
after = defaults()
print("CHANGED", sorted(k for k in after if after[k] != before.get(k)))
"""


def changed_defaults(mode: str) -> str:
    done = subprocess.run([sys.executable, "-c", SUITE_IN_A_PROCESS, mode],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return next(line for line in done.stdout.splitlines() if line.startswith("CHANGED"))


def test_an_option_case_leaves_every_processors_defaults_for_the_next_and_the_hf_reference():
    """What a case's options write into a processor class's defaults is undone when the case
    ends: the next case, another cell, and the HF reference the model checks build in the same
    worker see the defaults a fresh process has. The planted fault (the suite's restore
    removed) leaves the drawn option in Aya Vision's defaults, which the check sees."""
    assert changed_defaults("restored") == "CHANGED []"
    assert changed_defaults("planted") == "CHANGED ['AyaVisionProcessorKwargs']"
