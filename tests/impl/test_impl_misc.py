import numpy as np
import pytest
import torch

from impl import strategy_for
from impl.hashing import item_hash
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


def test_item_hash() -> None:
    fields = {"b": torch.ones(2, 2), "a": torch.tensor([1, 2])}
    same = {"a": torch.tensor([1, 2]), "b": torch.ones(2, 2)}
    assert item_hash(fields) == item_hash(same)
    assert item_hash(fields) != item_hash({**fields, "b": torch.ones(4)})
    assert item_hash(fields) != item_hash({**fields, "b": torch.ones(2, 2, dtype=torch.float64)})
    assert item_hash(fields) != item_hash({"c": fields["b"], "a": fields["a"]})
    bf16 = {"x": torch.ones(3, dtype=torch.bfloat16), "y": np.zeros(2), "z": [torch.ones(1), 3]}
    assert len(item_hash(bf16)) == 64


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
