"""Multimodal rotary positions (M-RoPE) from the model's own `get_rope_index`."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from impl.release import DEFAULT, MROPE_EMBED_TYPES, Profile
from impl.types import Placeholder, ProcessedPrompt

MODALITY_TOKEN_TYPE = {"image": 1, "video": 2, "audio": 3}
ROPE_FIELDS = (
    "image_grid_thw",
    "video_grid_thw",
    "second_per_grid_ts",
    "audio_feature_lengths",
    "use_audio_in_video",
)
AUDIO_ROPE_FIELDS = ("audio_feature_lengths", "use_audio_in_video")


@dataclass(frozen=True)
class Feature:
    """One item as the model runner sees it: where it sits and its fields."""

    modality: str
    placeholder: Placeholder
    fields: Mapping[str, Any]


def features_of(processed: ProcessedPrompt) -> list[Feature]:
    """Every item of every modality, in prompt order."""
    features = [
        Feature(modality, placeholder, fields)
        for modality, placeholders in processed.placeholders.items()
        for placeholder, fields in zip(
            placeholders, processed.item_fields.get(modality, []), strict=True
        )
    ]
    return sorted(features, key=lambda feature: feature.placeholder.offset)


def gather_fields(features: Iterable[Feature], names: Iterable[str]) -> dict[str, list[Any]]:
    gathered: dict[str, list[Any]] = {}
    for feature in features:
        for name in names:
            if name in feature.fields:
                gathered.setdefault(name, []).append(feature.fields[name])
    return gathered


def accepted_names(fn: Callable[..., Any]) -> frozenset[str] | None:
    """Parameter names `fn` takes, or None when it takes any keyword."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    return frozenset(params)


def token_type_ids(
    num_tokens: int, features: Iterable[Feature], *, profile: Profile = DEFAULT
) -> torch.Tensor:
    """Per prompt position, the type id of the modality whose placeholder covers it (0: text).
    Since MROPE_EMBED_TYPES only the positions that take the item's embeddings are typed: the
    tokens structuring an item (say, a row break inside an image) stay text."""
    types = torch.zeros(num_tokens, dtype=torch.int)
    for feature in features:
        type_id = MODALITY_TOKEN_TYPE[feature.modality]
        if profile.has(MROPE_EMBED_TYPES):
            positions = torch.tensor(feature.placeholder.embed_positions, dtype=torch.long)
            types[positions] = type_id
        else:
            start, length = feature.placeholder.offset, feature.placeholder.length
            types[start : start + length] = type_id
    return types.unsqueeze(0)


def refuse_unsupported(gathered: Mapping[str, list[Any]], profile: Profile) -> None:
    """Inputs whose positions the backend does not compute. A present field counts whatever
    its value (a gathered `use_audio_in_video=False` is refused too), as in the backend."""
    if profile.has(MROPE_EMBED_TYPES):
        if any(gathered.get(name) for name in AUDIO_ROPE_FIELDS):
            raise NotImplementedError("M-RoPE positions are not computed for audio inputs")
    elif any(values for name, values in gathered.items() if name != "image_grid_thw"):
        raise NotImplementedError("M-RoPE positions are only computed for image inputs")


def rope_kwargs(
    features: Sequence[Feature],
    num_tokens: int,
    accepted: frozenset[str] | None,
    *,
    profile: Profile = DEFAULT,
) -> dict[str, Any]:
    gathered = gather_fields(features, ROPE_FIELDS)
    refuse_unsupported(gathered, profile)

    def accepts(name: str) -> bool:
        return accepted is None or name in accepted

    # since MROPE_EMBED_TYPES the videos' `second_per_grid_ts` go in like the grids (before,
    # any of them was refused above)
    stacked = ("image_grid_thw", "video_grid_thw")
    if profile.has(MROPE_EMBED_TYPES):
        stacked += ("second_per_grid_ts",)
    values = {
        name: torch.stack(gathered[name]) if gathered.get(name) else None for name in stacked
    }
    # a value the model cannot take is dropped only when there is nothing in it
    kwargs = {name: value for name, value in values.items() if value is not None or accepts(name)}
    if accepts("mm_token_type_ids"):
        kwargs["mm_token_type_ids"] = token_type_ids(num_tokens, features, profile=profile)
    return kwargs


def mrope_input_positions(
    model: Any,
    input_tokens: Sequence[int],
    features: Sequence[Feature],
    *,
    profile: Profile = DEFAULT,
) -> tuple[torch.Tensor, int]:
    """(positions of shape [3, len(input_tokens)], position delta for decoding)."""
    get_rope_index = model.get_rope_index
    accepted = accepted_names(get_rope_index)
    kwargs = rope_kwargs(features, len(input_tokens), accepted, profile=profile)
    positions, delta = get_rope_index(
        input_ids=torch.tensor(list(input_tokens)).unsqueeze(0), **kwargs
    )
    return positions[:, 0], delta[0].item()
