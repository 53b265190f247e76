"""What the backend learns about a model from its HF processor and config alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_SAMPLING_RATE = 16000.0
# (width, height) far beyond any real image, so the token count is the model's maximum
LARGEST_IMAGE_SIZE = (10_000, 10_000)

AUDIO_CONFIG_NAMES = ("audio_config", "encoder_config")
AUDIO_LENGTH_NAMES = ("max_source_positions", "max_position_embeddings", "max_pos_emb")


def first_attr(obj: Any, names: Sequence[str], default: Any = None) -> Any:
    """The first of `names` that `obj` has (even when its value is None), else `default`."""
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    return default


def audio_processor(processor: Any) -> Any:
    # Older processors only expose the audio side as `feature_extractor`
    return first_attr(processor, ("audio_processor", "feature_extractor"))


def is_audio_model(processor: Any) -> bool:
    return audio_processor(processor) is not None


def is_image_model(processor: Any) -> bool:
    return hasattr(processor, "image_processor")


def supported_modalities(processor: Any) -> list[str]:
    modalities = [
        modality
        for modality, present in (
            ("audio", is_audio_model(processor)),
            ("image", is_image_model(processor)),
        )
        if present
    ]
    if not modalities:
        raise ValueError(
            f"{type(processor).__name__} has no image processor and no audio processor "
            "(nor feature extractor); there is no modality to serve."
        )
    return modalities


def supported_mm_limits(processor: Any) -> dict[str, int | None]:
    """Items allowed per prompt for each served modality; None: no limit of the backend's own."""
    return dict.fromkeys(supported_modalities(processor))


def audio_sampling_rate(processor: Any) -> float:
    sub = audio_processor(processor)
    if sub is not None and hasattr(sub, "sampling_rate"):
        return sub.sampling_rate
    return DEFAULT_SAMPLING_RATE


def max_audio_tokens(config: Any) -> int:
    audio_config = first_attr(config, AUDIO_CONFIG_NAMES, default=config)
    value = first_attr(audio_config, AUDIO_LENGTH_NAMES)
    if value is None:
        raise ValueError(
            f"{type(audio_config).__name__} states no maximum audio length; looked for "
            f"{AUDIO_LENGTH_NAMES}."
        )
    return int(value)


def max_image_tokens(processor: Any, processor_kwargs: Mapping[str, Any] | None = None) -> int:
    width, height = LARGEST_IMAGE_SIZE
    counts = processor._get_num_multimodal_tokens(
        image_sizes=([height, width],), **dict(processor_kwargs or {})
    )
    return counts["num_image_tokens"][0]


def max_tokens_per_item(
    processor: Any, config: Any, processor_kwargs: Mapping[str, Any] | None = None
) -> dict[str, int]:
    modalities = supported_modalities(processor)
    result: dict[str, int] = {}
    if "audio" in modalities:
        result["audio"] = max_audio_tokens(config)
    if "image" in modalities:
        result["image"] = max_image_tokens(processor, processor_kwargs)
    return result
