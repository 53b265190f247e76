"""The encoder side: running a model's image/video/audio encoders on per-item fields and
cutting the result into one embedding tensor per item."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from transformers.utils.generic import ModelOutput

from impl.release import BATCH_ROWS, DEFAULT, FEATURES_DICT, VIDEO, Profile
from impl.version import at_least

logger = logging.getLogger(__name__)

ENCODER_MODALITIES = ("image", "video", "audio")
AUDIO_SINCE = "5.13.0"


def find_encoder_classes(model: Any) -> dict[str, type]:
    """Per modality, the encoder class `get_encoder` names, when it is not the model itself."""
    classes: dict[str, type] = {}
    for modality in ENCODER_MODALITIES:
        try:
            encoder_cls = type(model.get_encoder(modality=modality))
        except (TypeError, ValueError):
            continue
        if encoder_cls is not type(model):
            classes[modality] = encoder_cls
    return classes


def split_embeddings(embeddings: torch.Tensor, split_sizes: Sequence[int]) -> list[torch.Tensor]:
    """Cut encoder output rows into items of `split_sizes` tokens.

    An output that is a whole multiple of the expected total is read as each token expanding
    to that many rows. Anything else only happens while sizing memory, so it is padded (by
    repetition) or truncated to fit, with a warning.
    """
    sizes = list(split_sizes)
    expected = sum(sizes)
    if embeddings.ndim > 2:
        embeddings = embeddings.reshape(-1, embeddings.shape[-1])
    rows = embeddings.shape[0]
    if rows == expected:
        row_sizes = sizes
    elif expected > 0 and rows % expected == 0:
        row_sizes = [size * (rows // expected) for size in sizes]
    elif expected > 0:
        if rows == 0:  # kept as upstream has it, though 0 rows already took the branch above
            raise ValueError(f"the encoder returned no embeddings where {sizes} were expected")
        logger.warning(
            "Encoder output has a different number of tokens than expected; padding or "
            "truncating it. Such embeddings only serve memory profiling."
        )
        if rows < expected:
            embeddings = embeddings.repeat(-(-expected // rows), 1)
        embeddings = embeddings[:expected]
        row_sizes = sizes
    else:
        return []
    return list(torch.split(embeddings, row_sizes, dim=0))


def unwrap_features(features: Any) -> Any:
    """The embeddings inside whatever `get_image_features` returned."""
    if isinstance(features, tuple):
        return features[0]
    if isinstance(features, ModelOutput):
        return features.pooler_output
    return features


def to_device(kwargs: Mapping[str, Any], device: torch.device) -> dict[str, Any]:
    """Tensors kept on the CPU (grids, counts) go where the encoder runs."""
    return {
        key: value.to(device, non_blocking=True)
        if isinstance(value, torch.Tensor) and value.is_cpu
        else value
        for key, value in kwargs.items()
    }


def vision_features(
    model: Any,
    modality: str,
    pixel_values: torch.Tensor,
    kwargs: Mapping[str, Any],
    *,
    profile: Profile = DEFAULT,
) -> Any:
    """What the model's `get_<modality>_features` gives for these pixels: the embeddings as a
    tensor, or one entry per item (or per batch row) when the model returns a sequence."""
    kwargs = to_device(kwargs, pixel_values.device)
    get_features = getattr(model, f"get_{modality}_features")
    if profile.has(FEATURES_DICT):
        # asked for a ModelOutput outright, so no guessing at the shape of the return value
        return get_features(pixel_values, return_dict=True, **kwargs).pooler_output
    return unwrap_features(get_features(pixel_values, **kwargs))


def select_item_kwargs(kwargs: Mapping[str, Any], index: int, num_items: int) -> dict[str, Any]:
    """Narrow every per-item entry to item `index`. Only the length identifies such entries,
    so an unrelated one of the same length is narrowed too."""
    return {
        key: value[index : index + 1]
        if isinstance(value, (torch.Tensor, list)) and len(value) == num_items
        else value
        for key, value in kwargs.items()
    }


def check_transformers(minimum: str, feature: str) -> None:
    import transformers

    if not at_least(transformers.__version__, minimum):
        raise ImportError(
            f"{feature} needs transformers>={minimum}; {transformers.__version__} is installed"
        )


def embed_audios(model: Any, **kwargs: Any) -> list[torch.Tensor] | None:
    features = kwargs.pop("input_features", None)
    if features is None:
        features = kwargs.pop("input_values", None)
    if features is None:
        return None
    check_transformers(AUDIO_SINCE, "audio support")
    split_sizes = kwargs.pop("num_audio_tokens").flatten().tolist()
    kwargs.pop("token_type_ids", None)
    kwargs.pop("mm_token_type_ids", None)
    if isinstance(features, torch.Tensor):
        output = model.get_audio_features(features, return_dict=True, **kwargs)
        return split_embeddings(output.pooler_output, split_sizes)
    # un-padded audios of differing lengths: one at a time, so none is padded to another
    embeddings: list[torch.Tensor] = []
    for index, item in enumerate(features):
        output = model.get_audio_features(
            item.unsqueeze(0),
            return_dict=True,
            **select_item_kwargs(kwargs, index, len(features)),
        )
        embeddings.extend(split_embeddings(output.pooler_output, [split_sizes[index]]))
    return embeddings


def embed_vision(
    model: Any,
    modality: str,
    pixel_values: Any,
    num_patches: torch.Tensor,
    kwargs: Mapping[str, Any],
    *,
    profile: Profile = DEFAULT,
) -> list[torch.Tensor]:
    """Images or videos (the same path since video landed) encoded and cut per item."""
    split_sizes = num_patches.flatten().tolist()
    if isinstance(pixel_values, torch.Tensor):
        features = vision_features(model, modality, pixel_values, kwargs, profile=profile)
        if isinstance(features, torch.Tensor):
            return split_embeddings(features, split_sizes)
        if profile.has(BATCH_ROWS) and len(features) != len(split_sizes):
            # one entry per batch row rather than per item: rejoin, then cut per item
            return split_embeddings(torch.cat(list(features)), split_sizes)
        return list(features)
    # un-padded items of differing shapes: one at a time, so none is padded to another
    embeddings: list[torch.Tensor] = []
    for index, item in enumerate(pixel_values):
        item_kwargs = select_item_kwargs(kwargs, index, len(pixel_values))
        features = vision_features(model, modality, item.unsqueeze(0), item_kwargs,
                                   profile=profile)
        if not isinstance(features, torch.Tensor):
            features = torch.cat(list(features))
        embeddings.extend(split_embeddings(features, [split_sizes[index]]))
    return embeddings


def embed_images(
    model: Any, *, profile: Profile = DEFAULT, **kwargs: Any
) -> list[torch.Tensor] | None:
    pixel_values = kwargs.pop("pixel_values", None)
    image_embeds = kwargs.pop("image_embeds", None)
    if pixel_values is None:
        pixel_values = kwargs.pop("image_patches", None)
    if image_embeds is not None:
        return [image_embeds]  # the whole batch's embeddings as one entry, as the backend does
    if pixel_values is None:
        return None
    num_patches = kwargs.pop("num_image_patches")
    return embed_vision(model, "image", pixel_values, num_patches, kwargs, profile=profile)


def embed_videos(
    model: Any, *, profile: Profile = DEFAULT, **kwargs: Any
) -> list[torch.Tensor] | None:
    pixel_values = kwargs.pop("pixel_values_videos", None)
    if pixel_values is None:
        return None
    # timing between temporal patches only matters to M-RoPE, not to the encoder
    kwargs.pop("second_per_grid_ts", None)
    num_patches = kwargs.pop("num_video_patches")
    return embed_vision(model, "video", pixel_values, num_patches, kwargs, profile=profile)


def embed_multimodal(
    model: Any, *, profile: Profile = DEFAULT, **kwargs: Any
) -> list[torch.Tensor]:
    """Called with one modality's batched fields; each helper recognises its own inputs (before
    video landed, video fields were recognised by none and gave no embeddings)."""
    embeddings: list[torch.Tensor] = list(embed_audios(model, **kwargs) or [])
    embeddings.extend(embed_images(model, profile=profile, **kwargs) or [])
    if profile.has(VIDEO):
        embeddings.extend(embed_videos(model, profile=profile, **kwargs) or [])
    return embeddings
