"""What the backend learns about a model from its HF processor and config alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from impl import budget
from impl.release import DEFAULT, IMAGE_BUDGET, VIDEO, Profile
from impl.version import at_least

DEFAULT_SAMPLING_RATE = 16000.0
# (width, height) far beyond any real image, so the token count is the model's maximum
LARGEST_IMAGE_SIZE = (10_000, 10_000)

AUDIO_CONFIG_NAMES = ("audio_config", "encoder_config")
AUDIO_LENGTH_NAMES = ("max_source_positions", "max_position_embeddings", "max_pos_emb")
# transformers counts video tokens per video (`video_sizes`) from this release on
VIDEO_SINCE = "5.18.0"


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


def installed_transformers() -> str:
    import transformers  # lazy: impl.info is imported by code that never needs transformers

    return transformers.__version__


def is_video_model(
    processor: Any,
    processor_kwargs: Mapping[str, Any] | None = None,
    *,
    profile: Profile = DEFAULT,
    transformers_version: str | None = None,
) -> bool:
    """Video is served (`VIDEO`) where the processor has a video processor, transformers
    counts per video (default: the installed one) and the count for one smallest video of
    224x224 frames names a token count. A processor that cannot count video at all
    (AttributeError) is served without video; any other failure of the count propagates."""
    if not profile.has(VIDEO) or not hasattr(processor, "video_processor"):
        return False
    if not at_least(transformers_version or installed_transformers(), VIDEO_SINCE):
        return False
    frames, side = budget.min_video_frames(processor), budget.MIN_DUMMY_SIDE
    try:
        counts = budget.count_tokens(processor, processor_kwargs,
                                     video_sizes=([frames, side, side],))
    except AttributeError:
        return False
    return counts["num_video_tokens"] is not None


def video_needs_metadata(processor: Any, *, profile: Profile = DEFAULT) -> bool:
    """Whether each video goes to the processor with its metadata (`VIDEO`): only a video
    processor that samples frames reads it."""
    if not profile.has(VIDEO):
        return False
    return bool(getattr(getattr(processor, "video_processor", None), "do_sample_frames", False))


def supported_modalities(
    processor: Any,
    processor_kwargs: Mapping[str, Any] | None = None,
    *,
    profile: Profile = DEFAULT,
    transformers_version: str | None = None,
) -> list[str]:
    """Served modalities, in the order audio, image, video. `processor_kwargs` are the
    model-level options the video count is asked with."""
    video = is_video_model(processor, processor_kwargs, profile=profile,
                           transformers_version=transformers_version)
    modalities = [
        modality
        for modality, present in (
            ("audio", is_audio_model(processor)),
            ("image", is_image_model(processor)),
            ("video", video),
        )
        if present
    ]
    if not modalities:
        kinds = ("no image, video or audio processor" if profile.has(VIDEO) else
                 "no image processor and no audio processor (nor feature extractor)")
        raise ValueError(f"{type(processor).__name__} has {kinds}; there is no modality to "
                         "serve.")
    return modalities


def supported_mm_limits(
    processor: Any,
    processor_kwargs: Mapping[str, Any] | None = None,
    *,
    profile: Profile = DEFAULT,
) -> dict[str, int | None]:
    """Items allowed per prompt for each served modality; None: no limit of the backend's own."""
    return dict.fromkeys(supported_modalities(processor, processor_kwargs, profile=profile))


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


def largest_image_size(
    processor: Any,
    processor_kwargs: Mapping[str, Any] | None = None,
    *,
    profile: Profile = DEFAULT,
) -> tuple[int, int]:
    """(width, height) of the image the backend profiles with: a fixed huge one, or
    (`IMAGE_BUDGET`) the smallest size found with the most tokens (`impl.budget`)."""
    if profile.has(IMAGE_BUDGET):
        return budget.image_size_with_most_features(processor, processor_kwargs)
    return LARGEST_IMAGE_SIZE


def max_image_tokens(
    processor: Any,
    processor_kwargs: Mapping[str, Any] | None = None,
    *,
    profile: Profile = DEFAULT,
) -> int:
    size = largest_image_size(processor, processor_kwargs, profile=profile)
    return budget.image_tokens(processor, processor_kwargs, size)


def max_tokens_per_item(
    processor: Any,
    config: Any,
    processor_kwargs: Mapping[str, Any] | None = None,
    *,
    seq_len: int | None = None,
    mm_counts: Mapping[str, int] | None = None,
    profile: Profile = DEFAULT,
) -> dict[str, int]:
    """Most tokens one item of each served modality can take. A served video's count depends
    on the frames that fit: `seq_len` (the model's length) and `mm_counts` (videos per prompt)
    are then needed."""
    modalities = supported_modalities(processor, processor_kwargs, profile=profile)
    result: dict[str, int] = {}
    if "audio" in modalities:
        result["audio"] = max_audio_tokens(config)
    if "image" in modalities:
        result["image"] = max_image_tokens(processor, processor_kwargs, profile=profile)
    if "video" in modalities:
        if seq_len is None:
            raise ValueError("the most tokens of a video depend on the sequence length: give "
                             "seq_len")
        result["video"] = budget.max_video_tokens(processor, processor_kwargs, seq_len,
                                                  mm_counts or {})
    return result
