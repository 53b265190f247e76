"""The legacy strategy (transformers < 5.15): the HF processor expands the real prompt, and
placeholders are read back out of the expanded token ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from impl.info import first_attr
from impl.types import Placeholder, placeholder_from_mask


def mm_token_ids(processor: Any, config: Any, tokenizer: Any, modality: str) -> list[int]:
    """Ids marking `modality` in an expanded prompt, per the processor, then the config, then
    the vocabulary entry of the processor's placeholder token."""
    declared = getattr(processor, f"{modality}_token_ids", None) or ()
    if ids := [token_id for token_id in declared if token_id is not None]:
        return ids
    names = (f"{modality}_token_id", f"{modality}_token_index")
    token_id = getattr(processor, names[0], first_attr(config, names))
    if token_id is None:
        token = getattr(processor, f"{modality}_token", None)
        if token is not None:
            token_id = tokenizer.get_vocab().get(token)
    if token_id is None:
        raise ValueError(f"neither the processor nor the model config names a {modality} token id")
    return [token_id]


def token_runs(flags: Sequence[bool]) -> list[tuple[int, int]]:
    """(offset, length) of each maximal run of True."""
    runs: list[tuple[int, int]] = []
    start = None
    for index, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = index
        elif not flag and start is not None:
            runs.append((start, index - start))
            start = None
    return runs


def audio_placeholders(
    prompt_ids: Sequence[int], audio_token_ids: Sequence[int], num_audios: int
) -> list[Placeholder]:
    """Each contiguous run of audio tokens is one item."""
    wanted = set(audio_token_ids)
    flags = [token in wanted for token in prompt_ids]
    if not any(flags):
        raise ValueError(
            f"{num_audios} audio item(s) given but the prompt has no audio token; put one "
            "placeholder in the prompt per audio."
        )
    runs = token_runs(flags)
    if len(runs) != num_audios:
        raise ValueError(
            f"{len(runs)} run(s) of audio tokens in the prompt for {num_audios} audio item(s). "
            "Audio placeholders are told apart by the text between them, so adjacent ones "
            "merge into one run; separate them in the prompt."
        )
    return [placeholder_from_mask(offset, None, length) for offset, length in runs]


def image_size_hw(image: Any) -> tuple[int, int]:
    """(height, width) of a PIL image, an HWC array or a CHW array/tensor."""
    if hasattr(image, "size") and not hasattr(image, "shape"):
        width, height = image.size
        return height, width
    if image.ndim == 3 and image.shape[-1] in (1, 3, 4):
        return int(image.shape[0]), int(image.shape[1])
    _, height, width = image.shape
    return int(height), int(width)


def require_type_ids(type_ids: Any, processor_name: str) -> None:
    if type_ids is None:
        raise ValueError(
            f"{processor_name} returned no mm_token_type_ids, so image placeholders cannot be "
            "located."
        )


def image_typed_positions(type_ids: Any) -> list[int]:
    """Positions typed as image: the image tokens and the tokens structuring them."""
    return torch.where(torch.as_tensor(type_ids)[0] == 1)[0].tolist()


def check_image_token_total(
    positions: Sequence[int], split: Sequence[int], processor_name: str, num_images: int
) -> None:
    if sum(split) != len(positions):
        raise ValueError(
            f"the expanded prompt marks {len(positions)} position(s) as image but "
            f"{processor_name} reports {sum(split)} token(s) for {num_images} image(s)"
        )


def split_image_placeholders(
    prompt_ids: Sequence[int],
    positions: Sequence[int],
    split: Sequence[int],
    image_token_ids: Sequence[int],
) -> list[Placeholder]:
    """Consecutive per-image spans of the reported sizes; only the image tokens inside a span
    (not its structuring tokens) carry embeddings."""
    embed_ids = set(image_token_ids)
    placeholders = []
    start = 0
    for size in split:
        span = positions[start : start + size]
        start += size
        offset = span[0]  # an image of zero tokens fails here, as it does upstream
        # The range is read as `length` positions from `offset`, so a span with gaps in it is
        # described by its i-th typed position standing at offset + i.
        flags = [prompt_ids[p] in embed_ids for p in span]
        placeholders.append(placeholder_from_mask(offset, flags, len(span)))
    return placeholders
