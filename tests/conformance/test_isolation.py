"""A case's processor options must not become the next case's defaults (see isolation.py)."""

from __future__ import annotations

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
