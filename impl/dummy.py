"""Dummy prompts and media: the text handed to the HF processor beside real media, and the
largest inputs used to size memory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from impl.info import (
    LARGEST_IMAGE_SIZE,
    audio_processor,
    audio_sampling_rate,
    is_audio_model,
    is_image_model,
)

DEFAULT_CHUNK_SECONDS = 30


def image_placeholder(processor: Any) -> str:
    """The text standing for one image in a prompt the HF processor will expand."""
    if "gemma3" in type(processor).__name__.lower():
        return processor.boi_token
    token = getattr(processor, "image_token", "")
    # Some processors only accept the image token inside its start/end markers
    start = getattr(processor, "image_start_token", "")
    end = getattr(processor, "image_end_token", "")
    return f"{start}{token}{end}"


def dummy_text(processor: Any, counts: Mapping[str, int]) -> str:
    text = ""
    if is_audio_model(processor) and (num_audios := counts.get("audio", 0)):
        # Spaces keep adjacent audio placeholders apart as separate runs
        text += " ".join([getattr(processor, "audio_token", "")] * num_audios)
    if is_image_model(processor) and (num_images := counts.get("image", 0)):
        text += image_placeholder(processor) * num_images
    return text


def dummy_prompt_ids(processor: Any, counts: Mapping[str, int]) -> list[int]:
    """The dummy text as a prompt, tokenized like any user prompt (special tokens added)."""
    return list(processor.tokenizer.encode(dummy_text(processor, counts), add_special_tokens=True))


def dummy_audio_length(processor: Any) -> int:
    sub = audio_processor(processor)
    chunk = getattr(sub, "chunk_length", None) if sub is not None else None
    if chunk is None:
        chunk = DEFAULT_CHUNK_SECONDS
    return int(chunk * audio_sampling_rate(processor))


def capped(limit: int, override: int | None) -> int:
    """An override may shrink a dummy dimension, never grow it."""
    return min(limit, override) if override else limit


def dummy_mm_data(
    processor: Any,
    counts: Mapping[str, int],
    overrides: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, list[Any]]:
    """Silent audios of one chunk and white RGB images of the largest size."""
    overrides = overrides or {}
    data: dict[str, list[Any]] = {}
    if is_audio_model(processor) and (num_audios := counts.get("audio", 0)):
        length = capped(dummy_audio_length(processor), overrides.get("audio", {}).get("length"))
        data["audio"] = [np.zeros((length,))] * num_audios
    if is_image_model(processor) and (num_images := counts.get("image", 0)):
        width, height = LARGEST_IMAGE_SIZE
        image_options = overrides.get("image", {})
        width = capped(width, image_options.get("width"))
        height = capped(height, image_options.get("height"))
        data["image"] = [white_image(width, height)] * num_images
    return data


def white_image(width: int, height: int) -> Any:
    from transformers.image_transforms import to_pil_image

    return to_pil_image(np.full((height, width, 3), 255, dtype=np.uint8))
