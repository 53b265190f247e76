"""The one difference vocabulary catches every kind of difference it claims to (planted)."""

import torch

from conformance.checks.differences import prompt_difference
from conformance.subjects.vllm import placeholder_from_range
from impl.types import Placeholder
from impl.types import ProcessedPrompt as Processed

BASE = Processed(
    prompt_ids=(1, 5, 4, 4, 4, 4, 7, 4, 4, 4, 4, 2),
    placeholders={"image": (Placeholder(2, 4, (2, 3, 4, 5)), Placeholder(7, 4, (7, 8, 9, 10)))},
)
NAMES = ("native", "backend")


def first_difference(expected: Processed, actual: Processed) -> str | None:
    return prompt_difference(expected, actual, NAMES)


def with_image(*placeholders):
    return Processed(BASE.prompt_ids, {"image": tuple(placeholders)})


def test_equal_outputs_have_no_difference():
    assert first_difference(BASE, BASE) is None


def test_is_embed_none_means_every_position():
    full = placeholder_from_range(2, 4, None)
    masked = placeholder_from_range(2, 4, torch.tensor([True, True, True, True]))
    assert full == masked == Placeholder(2, 4, (2, 3, 4, 5))
    partial = placeholder_from_range(2, 4, torch.tensor([False, True, True, False]))
    assert partial.embed_positions == (3, 4)


def test_a_changed_token_is_reported_with_its_position():
    changed = Processed(BASE.prompt_ids[:6] + (9,) + BASE.prompt_ids[7:], BASE.placeholders)
    assert "prompt ids differ at position 6: native [7, " in first_difference(BASE, changed)


def test_a_shorter_prompt_is_reported():
    shorter = Processed(BASE.prompt_ids[:-1], BASE.placeholders)
    assert "lengths 12 vs 11" in first_difference(BASE, shorter)


def test_an_offset_shifted_by_one_names_the_item():
    shifted = with_image(BASE.placeholders["image"][0], Placeholder(8, 4, (8, 9, 10, 11)))
    assert first_difference(BASE, shifted).startswith(
        "image item 1: ranges differ: native offset=7")


def test_a_missing_item_is_reported():
    assert "native has 2 placeholders, backend 1" in first_difference(
        BASE, with_image(BASE.placeholders["image"][0]))


def test_embedding_positions_are_compared_not_just_ranges():
    masked = with_image(Placeholder(2, 4, (3, 4)), BASE.placeholders["image"][1])
    difference = first_difference(BASE, masked)
    assert "embedding positions differ" in difference and "only native [2, 5]" in difference


def test_ranges_of_prompts_whose_ids_differ_name_the_ids_beside_their_embeddings():
    """A range covering markers around the soft tokens against one covering the soft tokens
    alone, in prompts one id apart (a BOS): the markers are named, whatever the item's size."""
    from conformance.checks.differences import prompt_differences

    for size in (2, 5):
        soft = (4,) * size
        native = Processed((1, 5, *soft, 6, 2),
                           {"image": (Placeholder(1, size + 2, tuple(range(2, 2 + size))),)})
        backend = Processed((9, 1, 5, *soft, 6, 2),
                            {"image": (Placeholder(3, size, tuple(range(3, 3 + size))),)})
        ids, ranges = prompt_differences(native, backend, NAMES)
        assert ids.startswith("prompt ids differ at position 0")
        assert ranges.startswith("image item 0: ranges differ within the item: native "
                                 f"offset=1 length={size + 2} embeds={size} of {size + 2}")
        assert ranges.endswith("(beside the embeddings native's range holds ids {5, 6}, "
                               "backend's none)")
