import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from impl_fakes import FakeTokenizer

from impl.offsets import bind_replacements, embed_token_id, target_token_ids
from impl.replace import (
    Replacement,
    apply_in_tokens,
    expand_prompt,
    find_token_match,
    plan_replacements,
    scan_placeholders,
)

IMG, AUD = 7, 8


def rep(modality: str, index: int, target: tuple[int, ...], tokens: tuple[int, ...]) -> Replacement:
    return Replacement(modality, index, target, tokens, embed_token_id(tokens))


def test_find_token_match() -> None:
    assert find_token_match([1, 2, 3, 2, 3], [2, 3], 0) == (1, 3)
    assert find_token_match([1, 2, 3, 2, 3], [2, 3], 2) == (3, 5)
    assert find_token_match([1, 2, 3], [3, 4], 0) is None
    assert find_token_match([1, 2, 3], [], 0) is None
    assert find_token_match((5, 1, 2), (1, 2), 0) == (1, 3)  # any sequence, not only lists
    assert find_token_match(torch.tensor([5, 1, 2]).tolist(), [2], 2) == (2, 3)


@given(st.lists(st.integers(0, 3), max_size=12), st.lists(st.integers(0, 3), max_size=3),
       st.integers(0, 12))
def test_find_token_match_is_the_first_window_equal_to_the_target(prompt, target, start):
    """The C-level search for the first token finds what comparing every window finds."""
    windows = [i for i in range(start, len(prompt) - len(target) + 1)
               if target and prompt[i:i + len(target)] == target]
    expected = (windows[0], windows[0] + len(target)) if windows else None
    assert find_token_match(prompt, target, start) == expected


@pytest.mark.parametrize(
    ("ids", "expected"),
    [([5, 3, 5, 3, 9], 3), ([7, 2, 2, 7], 2), ([9, 8], 8), ([4, 9, 9, 9, 5], 9), ([6], 6)],
)
def test_embed_token_is_torch_mode(ids: list[int], expected: int) -> None:
    assert embed_token_id(ids) == expected
    assert embed_token_id(torch.tensor(ids)) == int(torch.tensor(ids).mode().values)


def test_embed_token_of_nothing() -> None:
    with pytest.raises(IndexError):
        embed_token_id([])


def test_target_token_ids() -> None:
    tokenizer = FakeTokenizer()
    assert target_token_ids(tokenizer, "<image>") == (1,)
    assert target_token_ids(tokenizer, 12) == (12,)
    assert target_token_ids(tokenizer, [3, 4]) == (3, 4)


def test_ith_occurrence_goes_to_item_i() -> None:
    updates = {
        "image": [rep("image", 0, (IMG,), (20, IMG, IMG, 21)), rep("image", 1, (IMG,), (IMG,))],
    }
    prompt = [1, IMG, 2, IMG, 3, IMG]  # one spare placeholder stays as it is
    expanded, placeholders, complete = apply_in_tokens(prompt, updates)
    assert complete
    assert expanded == [1, 20, IMG, IMG, 21, 2, IMG, 3, IMG]
    first, second = placeholders["image"]
    assert (first.offset, first.length, first.embed_positions) == (1, 4, (2, 3))
    assert (second.offset, second.length, second.embed_positions) == (6, 1, (6,))


def test_modalities_interleave_by_position() -> None:
    updates = {
        "audio": [rep("audio", 0, (AUD,), (AUD, AUD)), rep("audio", 1, (AUD,), (AUD,))],
        "image": [rep("image", 0, (IMG,), (IMG, IMG, IMG))],
    }
    expanded, placeholders, _ = apply_in_tokens([IMG, 0, AUD, 0, AUD], updates)
    assert expanded == [IMG, IMG, IMG, 0, AUD, AUD, 0, AUD]
    assert [p.offset for p in placeholders["image"]] == [0]
    assert [p.offset for p in placeholders["audio"]] == [4, 7]


def test_shared_target_goes_to_the_earlier_modality_first() -> None:
    updates = {
        "audio": [rep("audio", 0, (IMG,), (30,))],
        "image": [rep("image", 0, (IMG,), (40,))],
    }
    planned = plan_replacements(updates, lambda t, s: find_token_match([IMG, IMG], t, s))
    assert [(span, r.modality) for span, r in planned] == [((0, 1), "audio"), ((1, 2), "image")]


def test_multi_token_target_matches_are_not_overlapping() -> None:
    updates = {"image": [rep("image", i, (5, 5), (9,)) for i in range(2)]}
    expanded, _, complete = apply_in_tokens([5, 5, 5, 5], updates)
    assert complete and expanded == [9, 9]


def test_text_fallback_when_target_merges_with_its_neighbour() -> None:
    # "x<image>" is one token, so the bare "<image>" target is not found among the ids
    tokenizer = FakeTokenizer(pieces=("x<image>",))
    prompt = tokenizer.encode("ax<image>b<image>", add_special_tokens=True)
    image = tokenizer.token_id("<image>")
    boi = tokenizer.token_id("<boi>")
    updates = {
        "image": [
            rep("image", 0, (image,), (boi, image, image)),
            rep("image", 1, (image,), (image,)),
        ]
    }
    assert not apply_in_tokens(prompt, updates)[2]
    expanded, placeholders = expand_prompt(prompt, updates, tokenizer)
    assert tokenizer.decode(expanded) == "<s>ax<boi><image><image>b<image>"
    first, second = placeholders["image"]
    assert (first.offset, first.length, first.embed_positions) == (3, 3, (4, 5))
    assert (second.offset, second.embed_positions) == (7, (7,))


def test_missing_placeholder_is_an_assertion_error() -> None:
    tokenizer = FakeTokenizer()
    image = tokenizer.token_id("<image>")
    updates = {"image": [rep("image", i, (image,), (image, image)) for i in range(2)]}
    with pytest.raises(AssertionError, match=r"image\[1\]"):
        expand_prompt(tokenizer.encode("one <image> only"), updates, tokenizer)


def test_scan_placeholders_takes_items_in_order() -> None:
    updates = {
        "image": [rep("image", 0, (IMG,), (1, 2)), rep("image", 1, (IMG,), (1, 2, 3))],
        "audio": [rep("audio", 0, (AUD,), (4,))],
    }
    found = scan_placeholders([0, 1, 2, 4, 1, 2, 3, 1, 2], updates)
    assert [(p.offset, p.length) for p in found["image"]] == [(1, 2), (4, 3)]
    assert [(p.offset, p.length) for p in found["audio"]] == [(3, 1)]


def test_bind_replacements() -> None:
    updates = {"image": [rep("image", i, (IMG,), (IMG,)) for i in range(3)]}
    assert len(bind_replacements(updates, {"image": 2})["image"]) == 2
    with pytest.raises(IndexError):
        bind_replacements(updates, {"image": 4})
