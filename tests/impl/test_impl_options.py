"""Model-level processor options reach the processor the way vLLM passes them."""

from __future__ import annotations

from PIL import Image

from conformance.subjects.context import fixture_path
from impl.hf import call_time_options, load_processor


def test_call_time_options_are_the_processor_kwargs_groups():
    processor = load_processor(fixture_path("idefics3"))
    names = call_time_options(processor)
    assert {"do_resize", "size", "return_tensors"} <= names
    assert "image_seq_len" not in names  # a construction argument


def test_an_option_call_does_not_honour_is_a_construction_argument():
    # Qwen2-VL's __call__ ignores `max_pixels` while its token count honours it (5.17.0);
    # vLLM passes options its __call__ does not declare to the processor's construction.
    path = fixture_path("qwen2_vl")
    image = Image.new("RGB", (300, 100))
    default = load_processor(path)(text="<|image_pad|>", images=[image])["image_grid_thw"]
    capped = load_processor(path, {"max_pixels": 28 * 28})(
        text="<|image_pad|>", images=[image])["image_grid_thw"]
    assert int(capped.prod()) < int(default.prod())
    assert int(capped.prod()) == 4  # 28 x 28 px: one merged token of 2 x 2 patches
