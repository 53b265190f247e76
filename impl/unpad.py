"""Making each item's processed data depend on that item alone.

Processors pad a batch to its largest member; cached per-item data would then carry traces of
whatever it happened to be processed beside.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch


def unpad_images(hf_inputs: Mapping[str, Any]) -> list[torch.Tensor] | None:
    """`pixel_values` trimmed back to each image's own size, or None when it should stay.

    `image_sizes` only describes the padding if its maximum is exactly the padded size; some
    processors (llava-onevision) report the original sizes instead.
    """
    pixel_values = hf_inputs.get("pixel_values")
    image_sizes = hf_inputs.get("image_sizes")
    if not isinstance(pixel_values, torch.Tensor) or not isinstance(image_sizes, torch.Tensor):
        return None
    if pixel_values.ndim != 4 or len(pixel_values) != len(image_sizes):
        return None
    if image_sizes.max(dim=0).values.tolist() != list(pixel_values.shape[-2:]):
        return None
    return [
        image[..., :height, :width]
        for image, (height, width) in zip(pixel_values, image_sizes.tolist(), strict=True)
    ]


def apply_unpad_images(hf_inputs: dict[str, Any]) -> None:
    if (trimmed := unpad_images(hf_inputs)) is not None:
        hf_inputs["pixel_values"] = trimmed


def audios_need_reprocessing(audios: Any) -> bool:
    """Only a batch of differing lengths gets padded differently than each audio alone."""
    if not isinstance(audios, Iterable) or not audios:
        return False
    return len({len(audio) for audio in audios}) > 1


def unpad_audios(
    hf_inputs: Mapping[str, Any],
    audios: Any,
    field_names: Iterable[str],
    process_alone: Callable[[Any], Mapping[str, Any]],
) -> dict[str, list[Any]]:
    """Replacement values for the audio tensor fields, each audio processed by itself.

    Nothing in the output says how long each audio really was, and a lone audio is padded too,
    so reprocessing is the only way to learn what an audio yields on its own.
    """
    if not audios_need_reprocessing(audios):
        return {}
    alone = [process_alone(audio) for audio in audios]
    return {
        name: [output[name][0] for output in alone]
        for name in field_names
        if isinstance(hf_inputs.get(name), torch.Tensor)
    }
