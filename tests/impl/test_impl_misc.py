import numpy as np
import pytest
import torch

from impl import strategy_for
from impl.hashing import media_hash
from impl.hf import accepted_kwargs, call_processor, map_tensors
from impl.types import placeholder_from_mask


@pytest.mark.parametrize(
    ("version", "strategy"),
    [
        ("4.57.1", "legacy"),
        ("5.14.9", "legacy"),
        ("5.15.0.dev0", "legacy"),
        ("5.15.0rc1", "legacy"),
        ("5.15.0", "offsets"),
        ("5.15", "offsets"),
        ("5.15.0+cpu", "offsets"),
        ("5.15.0.post1", "offsets"),
        ("5.17.0", "offsets"),
        ("6.0.0", "offsets"),
    ],
)
def test_strategy_for(version: str, strategy: str) -> None:
    assert strategy_for(version) == strategy


def test_media_hash_is_of_the_input_item_model_and_options() -> None:
    from PIL import Image

    red, blue = Image.new("RGB", (4, 3), "red"), Image.new("RGB", (4, 3), "blue")
    key = media_hash("m", "image", red, {"size": 2})
    assert key == media_hash("m", "image", Image.new("RGB", (4, 3), "red"), {"size": 2})
    assert key != media_hash("m", "image", blue, {"size": 2})
    assert key != media_hash("m", "image", red.convert("RGBA"), {"size": 2})
    assert key != media_hash("m", "image", red, {"size": 3})
    assert key != media_hash("other", "image", red, {"size": 2})
    audio = np.zeros(8, dtype=np.float32)
    assert media_hash("m", "audio", audio, {}) != media_hash("m", "audio", audio[:4], {})
    assert media_hash("m", "audio", (audio, 16000), {}) != media_hash("m", "audio", audio, {})
    bf16 = torch.ones(3, dtype=torch.bfloat16)
    assert media_hash("m", "x", bf16, {}) != media_hash("m", "x", bf16.float(), {})
    # a request's own options are part of the key; none keeps the key a request always had
    assert media_hash("m", "image", red, {"size": 2}, {}) == key
    assert media_hash("m", "image", red, {"size": 2}, {"size": 3}) != key
    assert media_hash("m", "image", red, {}, {"size": 2}) != media_hash("m", "image", red, {})
    # another modality's option group cannot reach an image: as vLLM's `get_mm_hashes`, no split
    assert media_hash("m", "image", red, {"size": 2}, {"videos_kwargs": {"fps": 1}}) == key
    assert media_hash("m", "image", red, {"size": 2}, {"images_kwargs": {"size": 3}}) != key
    assert media_hash("m", "video", audio, {}, {"images_kwargs": {"size": 3}}) == \
        media_hash("m", "video", audio, {})


def test_placeholder_from_mask() -> None:
    assert placeholder_from_mask(3, None, 2).embed_positions == (3, 4)
    assert placeholder_from_mask(3, [False, True], 2).embed_positions == (4,)


def test_accepted_kwargs() -> None:
    def strict(text, *, size=None):
        return None

    def loose(text, **kwargs):
        return None

    assert accepted_kwargs(strict, {"size": 1, "other": 2}) == {"size": 1}
    assert accepted_kwargs(loose, {"size": 1, "other": 2}) == {"size": 1, "other": 2}


def test_call_processor_wraps_failures_and_casts() -> None:
    def broken(**kwargs):
        raise KeyError("boom")

    with pytest.raises(ValueError, match="boom"):
        call_processor(broken, {"text": "x"}, {})

    def fine(text, return_tensors=None):
        assert return_tensors == "pt"
        return {"pixel_values": torch.ones(1), "ids": torch.tensor([1]), "meta": [{"a": (1,)}]}

    out = call_processor(fine, {"text": "x"}, {"dropped": 1}, dtype=torch.float16)
    assert out["pixel_values"].dtype == torch.float16 and out["ids"].dtype == torch.long
    assert out["meta"] == [{"a": (1,)}]


def test_map_tensors_maps_every_tensor_and_keeps_plain_leaves() -> None:
    entry = {"type": "image", "span": (3, 4), "replacement": "<img>"}
    value = {"ids": torch.ones(2), "offsets": [[entry]], "pair": (torch.zeros(1), 2)}
    mapped = map_tensors(value, lambda t: t + 1)
    assert torch.equal(mapped["ids"], torch.full((2,), 2.0))
    assert mapped["offsets"] == [[entry]] and mapped["offsets"][0][0] is not entry
    assert torch.equal(mapped["pair"][0], torch.ones(1)) and mapped["pair"][1] == 2


@pytest.mark.parametrize(("text", "release"), [
    ("5.25.0", True), ("0.34.0", True), ("5.15.0rc1", False), ("0.34.0.dev3", False),
    ("0.34.0.dev3@ci-venv", False), ("5.23", False), ("1!5.0.0", False), ("5.0.0+cpu", False),
    ("05.0.0", False), ("not a version", False)])
def test_a_release_is_major_minor_patch_as_written(text: str, release: bool) -> None:
    from impl.version import is_release

    assert is_release(text) is release
