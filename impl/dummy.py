"""Dummy prompts and media: the text handed to the HF processor beside real media, and the
largest inputs used to size memory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from impl import budget
from impl.info import (
    audio_processor,
    audio_sampling_rate,
    is_audio_model,
    is_image_model,
    is_video_model,
    largest_image_size,
    video_needs_metadata,
)
from impl.release import DEFAULT, Profile

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


def dummy_text(
    processor: Any,
    counts: Mapping[str, int],
    *,
    profile: Profile = DEFAULT,
    processor_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """Placeholders for `counts` items, audio first, then images, then videos (where video is
    served: `processor_kwargs` are the model-level options its count is asked with)."""
    text = ""
    if is_audio_model(processor) and (num_audios := counts.get("audio", 0)):
        # Spaces keep adjacent audio placeholders apart as separate runs
        text += " ".join([getattr(processor, "audio_token", "")] * num_audios)
    if is_image_model(processor) and (num_images := counts.get("image", 0)):
        text += image_placeholder(processor) * num_images
    if (num_videos := counts.get("video", 0)) and is_video_model(
            processor, processor_kwargs, profile=profile):
        text += getattr(processor, "video_token", "") * num_videos
    return text


def dummy_prompt_ids(
    processor: Any,
    counts: Mapping[str, int],
    *,
    profile: Profile = DEFAULT,
    processor_kwargs: Mapping[str, Any] | None = None,
) -> list[int]:
    """The dummy text as a prompt, tokenized like any user prompt (special tokens added)."""
    text = dummy_text(processor, counts, profile=profile, processor_kwargs=processor_kwargs)
    return list(processor.tokenizer.encode(text, add_special_tokens=True))


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
    *,
    profile: Profile = DEFAULT,
    processor_kwargs: Mapping[str, Any] | None = None,
    seq_len: int | None = None,
) -> dict[str, list[Any]]:
    """Silent audios of one chunk, RGB images of vLLM's fill (`dummy_image`) of the largest
    size and (where video is served) white videos of the frames and frame size with the most
    tokens for `seq_len`.
    `processor_kwargs`: the model-level options every token count is asked with."""
    overrides = overrides or {}
    data: dict[str, list[Any]] = {}
    if is_audio_model(processor) and (num_audios := counts.get("audio", 0)):
        length = capped(dummy_audio_length(processor), overrides.get("audio", {}).get("length"))
        data["audio"] = [np.zeros((length,))] * num_audios
    if is_image_model(processor) and (num_images := counts.get("image", 0)):
        width, height = largest_image_size(processor, processor_kwargs, profile=profile)
        image_options = overrides.get("image", {})
        width = capped(width, image_options.get("width"))
        height = capped(height, image_options.get("height"))
        data["image"] = [dummy_image(width, height)] * num_images
    if counts.get("video", 0) and is_video_model(processor, processor_kwargs, profile=profile):
        if seq_len is None:
            raise ValueError("the dummy video's frames depend on the sequence length: give "
                             "seq_len")
        data["video"] = dummy_videos(processor, counts, overrides.get("video", {}), seq_len,
                                     processor_kwargs, profile=profile)
    return data


def dummy_videos(
    processor: Any,
    counts: Mapping[str, int],
    options: Mapping[str, int],
    seq_len: int,
    processor_kwargs: Mapping[str, Any] | None = None,
    *,
    profile: Profile = DEFAULT,
) -> list[Any]:
    """`counts["video"]` white videos (frames x height x width x 3, uint8), each with the
    metadata of a decoder that kept every frame where the video processor samples frames
    (sampling off, so the dummy frames are taken as they are)."""
    frames = budget.num_frames_with_most_features(processor, processor_kwargs, seq_len, counts)
    width, height = budget.video_size_with_most_features(processor, processor_kwargs, frames)
    frames = capped(frames, options.get("num_frames"))
    width = capped(width, options.get("width"))
    height = capped(height, options.get("height"))
    video = np.full((frames, height, width, 3), 255, dtype=np.uint8)
    videos: list[Any] = [video] * counts["video"]
    if not video_needs_metadata(processor, profile=profile):
        return videos
    fps = getattr(processor.video_processor, "fps", None)
    return [(each, dummy_video_metadata(len(each), fps)) for each in videos]


def dummy_video_metadata(frames: int, fps: float | None) -> dict[str, Any]:
    return {
        "fps": fps,
        "duration": frames / fps if fps else None,
        "total_num_frames": frames,
        "frames_indices": list(range(frames)),
        "video_backend": "opencv",
        "do_sample_frames": False,
    }


def dummy_image(width: int, height: int) -> Any:
    """vLLM's dummy image: an RGB image whose fill is the single value 255, which sets the
    first band alone (red); its videos are white (255 in every channel)."""
    from transformers.image_transforms import to_pil_image

    pixels = np.zeros((height, width, 3), dtype=np.uint8)
    pixels[..., 0] = 255
    # said outright: a 3-pixel-high image would otherwise be read as channels first
    return to_pil_image(pixels, input_data_format="channels_last")
