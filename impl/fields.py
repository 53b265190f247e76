"""Attributing HF processor outputs to modalities and cutting them into per-item pieces."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

import numpy as np
import torch

from impl.info import audio_processor
from impl.release import DEFAULT, VIDEO, Profile

logger = logging.getLogger(__name__)

# The per-item count each modality's flat fields are sliced by; written by the backend itself
MODALITY_SIZE_KEYS = {"audio": "num_audio_tokens", "image": "num_image_patches"}
# ... and with video served (`VIDEO`), a video's by its patches
VIDEO_SIZE_KEY = "num_video_patches"
# Before video is served: one row per image whatever they describe, and only ever read on the
# CPU (video grids too, filed under image)
GRID_KEYS = ("image_grid_thw", "video_grid_thw")
# With video served (`VIDEO`): one row per item, CPU only, each filed under its own modality
ITEM_ROW_KEYS = {"image_grid_thw": "image", "video_grid_thw": "video",
                 "second_per_grid_ts": "video"}
# Every HF processor returns it; nothing downstream wants it
DROPPED_KEYS = ("attention_mask",)


@dataclass(frozen=True)
class FieldSpec:
    """How one output field is divided among a modality's items.

    `sizes` None: one entry per item along the first dimension ("batched"). Otherwise item i
    owns `sizes[i]` consecutive rows along `dim` ("flat").
    """

    modality: str
    sizes: tuple[int, ...] | None = None
    dim: int = 0
    keep_on_cpu: bool = False

    @property
    def layout(self) -> str:
        return "batched" if self.sizes is None else "flat"


def long_tensor(values: Sequence[int]) -> torch.Tensor:
    """A 1-D int64 tensor of `values` (what `torch.tensor` makes of Python ints), through numpy:
    `torch.tensor` on a short list costs ~5x more, paid several times per prompt."""
    return torch.from_numpy(np.array(values, dtype=np.int64).reshape(-1))


def batched(modality: str, *, keep_on_cpu: bool = False) -> FieldSpec:
    return FieldSpec(modality, None, 0, keep_on_cpu)


def flat_from_sizes(
    modality: str, sizes: Any, dim: int = 0, *, keep_on_cpu: bool = False
) -> FieldSpec:
    if type(sizes) is tuple and all(type(size) is int for size in sizes):
        return FieldSpec(modality, sizes, dim, keep_on_cpu)  # already validated: no tensor
    sizes = torch.as_tensor(sizes)
    if sizes.ndim != 1:
        raise ValueError(f"per-item sizes must be one-dimensional, got shape {tuple(sizes.shape)}")
    return FieldSpec(modality, tuple(map(int, sizes.tolist())), dim, keep_on_cpu)


def sub_processor(processor: Any, modality: str) -> Any:
    if modality == "audio":
        return audio_processor(processor)
    return getattr(processor, f"{modality}_processor", None)


def modality_field_names(processor: Any, modality: str) -> set[str]:
    """Fields the modality's sub-processor can produce, plus precomputed embeddings."""
    names = {f"{modality}_embeds"}
    for name in getattr(sub_processor(processor, modality), "model_input_names", None) or ():
        # masks come along with their field without always being declared
        names.update((name, f"{name}_mask"))
    return names


def partition_keys_by_modality(
    processor: Any, keys: Sequence[str], modalities: Sequence[str]
) -> dict[str, list[str]]:
    if len(modalities) == 1:
        return {modalities[0]: list(keys)}
    claimed = {modality: modality_field_names(processor, modality) for modality in modalities}
    owned: dict[str, list[str]] = {modality: [] for modality in modalities}
    unclaimed: list[str] = []
    for key in keys:
        owner = next((m for m in modalities if key in claimed[m]), None)
        if owner is None:
            unclaimed.append(key)
        else:
            owned[owner].append(key)
    if unclaimed:
        logger.warning(
            "Outputs %s belong to none of the modalities %s and are dropped; declare them in "
            "the sub-processor's model_input_names to keep them.",
            tuple(unclaimed),
            tuple(modalities),
        )
    return owned


def slice_dim(data: Any, total_rows: int) -> int:
    """Dimension holding the item rows: 1 when a leading batch dimension (Idefics3) comes first."""
    if not isinstance(data, torch.Tensor) or data.ndim < 2:
        return 0
    if data.shape[0] != total_rows and data.shape[1] == total_rows:
        return 1
    return 0


def size_keys(profile: Profile = DEFAULT) -> dict[str, str]:
    """Per modality, the key of its per-item counts."""
    if profile.has(VIDEO):
        return {**MODALITY_SIZE_KEYS, "video": VIDEO_SIZE_KEY}
    return dict(MODALITY_SIZE_KEYS)


def own_keys(modalities: Iterable[str], profile: Profile = DEFAULT) -> set[str]:
    """Keys the backend wrote or registers by name: never attributed through a sub-processor.
    With video served (`VIDEO`) these include the per-item rows and a video's token count."""
    keys = set(size_keys(profile).values()) | set(DROPPED_KEYS)
    if profile.has(VIDEO):
        keys |= {"num_video_tokens", *ITEM_ROW_KEYS}
    for modality in modalities:
        keys |= {f"{modality}_replacement_ids", f"{modality}_replacement_sizes"}
    return keys


def video_field_spec(processor: Any, key: str, hf_inputs: Mapping[str, Any],
                     rows_per_item: tuple[int, ...], dim: int) -> FieldSpec:
    """A video field's layout, read off its row count (`VIDEO`): one row per video (batched),
    one per patch, or one per token the replacements carry (VideoLLaMA3's compression mask).
    Rows matching none of these belong to no video the backend could name: an error."""
    rows = hf_inputs[key].shape[dim]
    if rows == len(rows_per_item):
        return batched("video")
    if rows == sum(rows_per_item):
        return flat_from_sizes("video", rows_per_item, dim)
    tokens = hf_inputs["num_video_tokens"]
    if rows == int(tokens.sum()):
        return flat_from_sizes("video", tokens, dim)
    raise ValueError(
        f"{type(processor).__name__} gave {rows} row(s) of {key} for {len(rows_per_item)} "
        f"video(s) of {sum(rows_per_item)} patch(es) in all: no rule assigns them to videos."
    )


def field_specs(
    processor: Any, hf_inputs: Mapping[str, Any], *, profile: Profile = DEFAULT
) -> dict[str, FieldSpec]:
    """A spec for every output that reaches the model, keyed by output name."""
    keyed = size_keys(profile)
    sizes = {m: hf_inputs.get(key) for m, key in keyed.items()}
    modalities = [m for m, size in sizes.items() if size is not None]
    skipped = own_keys(modalities, profile)
    keys = [key for key in hf_inputs if key not in skipped]
    owned = partition_keys_by_modality(processor, keys, modalities)

    specs: dict[str, FieldSpec] = {}
    for modality in modalities:
        rows: tuple[int, ...] | None = None
        for key in owned[modality]:
            data = hf_inputs[key]
            # audio and un-padded (list) fields already hold one entry per item
            if modality == "audio" or isinstance(data, list):
                specs[key] = batched(modality)
                continue
            if rows is None:  # checked and made Python ints once, not once per field
                rows = flat_from_sizes(modality, sizes[modality]).sizes
            dim = slice_dim(data, sum(rows))
            if modality == "video":
                specs[key] = video_field_spec(processor, key, hf_inputs, rows, dim)
            else:
                specs[key] = flat_from_sizes(modality, rows, dim)
    for modality in modalities:
        specs[keyed[modality]] = batched(modality, keep_on_cpu=True)
        replacement_sizes = hf_inputs.get(f"{modality}_replacement_sizes")
        if replacement_sizes is not None:
            specs[f"{modality}_replacement_ids"] = flat_from_sizes(
                modality, replacement_sizes, keep_on_cpu=True
            )
    if profile.has(VIDEO):
        for key, modality in ITEM_ROW_KEYS.items():
            if modality in modalities:
                specs[key] = batched(modality, keep_on_cpu=True)
    elif "image" in modalities:
        # video grids are filed under image until video is served
        for key in GRID_KEYS:
            specs[key] = batched("image", keep_on_cpu=True)
    return specs


def keep_on_cpu_keys(specs: Mapping[str, FieldSpec]) -> set[str]:
    return {key for key, spec in specs.items() if spec.keep_on_cpu}


def slice_field(data: Any, spec: FieldSpec) -> list[Any]:
    # a tensor is cut in one call (views of the same rows as indexing gives, far cheaper)
    if spec.sizes is None:
        return list(data.unbind(0)) if isinstance(data, torch.Tensor) else list(data)
    if isinstance(data, torch.Tensor) and data.shape[spec.dim] == sum(spec.sizes):
        # Tensor.split's own Python wrapper costs as much again as the cut
        return list(data.split_with_sizes(list(spec.sizes), dim=spec.dim))
    bounds = [0, *accumulate(spec.sizes)]
    lead = (slice(None),) * spec.dim
    return [
        data[lead + (slice(start, end),)]
        for start, end in zip(bounds[:-1], bounds[1:], strict=True)
    ]


def split_items(
    hf_inputs: Mapping[str, Any], specs: Mapping[str, FieldSpec]
) -> dict[str, list[dict[str, Any]]]:
    """Per modality, one dict of field values per item. Absent or empty fields are skipped."""
    pieces: dict[str, dict[str, list[Any]]] = {}
    for key, spec in specs.items():
        data = hf_inputs.get(key)
        if data is None:
            continue
        elems = slice_field(data, spec)
        if elems:
            pieces.setdefault(spec.modality, {})[key] = elems
    items: dict[str, list[dict[str, Any]]] = {}
    for modality, by_key in pieces.items():
        counts = {key: len(elems) for key, elems in by_key.items()}
        if len(set(counts.values())) > 1:
            raise ValueError(
                f"{modality} fields disagree on the number of items: {counts}"
            )
        count = next(iter(counts.values()))
        items[modality] = [{key: elems[i] for key, elems in by_key.items()} for i in range(count)]
    return items


def num_patches_per_image(
    processor: Any, images: Any, processor_kwargs: Mapping[str, Any] | None = None
) -> list[int] | None:
    """Rows of image data per image according to the processor, if it can say."""
    if not isinstance(images, Iterable) or not images:
        return None
    try:
        sizes = [(image.height, image.width) for image in images]
        counts = processor._get_num_multimodal_tokens(
            image_sizes=sizes, **dict(processor_kwargs or {})
        )
        return list(counts["num_image_patches"])
    except (AttributeError, KeyError, TypeError):
        return None


def rows_per_image(
    processor: Any,
    hf_inputs: Mapping[str, Any],
    images: Any,
    num_images: int,
    processor_kwargs: Mapping[str, Any] | None = None,
) -> list[int]:
    """Rows of the image fields owned by each image: the grid's cells (a row (t, h, w) per
    image), else the processor's patch count, else one row per image."""
    if (grid := hf_inputs.get("image_grid_thw")) is not None:
        return [math.prod(row) for row in grid.tolist()]
    if (counts := num_patches_per_image(processor, images, processor_kwargs)) is not None:
        return [int(n) for n in counts]
    return [1] * num_images


def image_data(hf_inputs: Mapping[str, Any]) -> Any:
    """The image field the rows are counted in."""
    return hf_inputs.get("pixel_values", hf_inputs.get("image_patches"))


def image_row_layout(
    processor: Any,
    hf_inputs: Mapping[str, Any],
    images: Any,
    num_images: int,
    processor_kwargs: Mapping[str, Any] | None = None,
) -> tuple[list[int], int | None]:
    """Each image's rows and the dimension of the image data they lie along (None where the
    data is already one entry per image), before any check that they add up."""
    rows = rows_per_image(processor, hf_inputs, images, num_images, processor_kwargs)
    data = image_data(hf_inputs)
    dim = slice_dim(data, sum(rows)) if isinstance(data, torch.Tensor) else None
    return rows, dim


def image_rows_per_item(
    processor: Any,
    hf_inputs: Mapping[str, Any],
    images: Any,
    num_images: int,
    processor_kwargs: Mapping[str, Any] | None = None,
) -> torch.Tensor:
    """Rows of the image fields owned by each image, checked against the data to be cut."""
    owned, dim = image_row_layout(processor, hf_inputs, images, num_images, processor_kwargs)
    if dim is not None and (rows := image_data(hf_inputs).shape[dim]) != sum(owned):
        raise ValueError(
            f"{type(processor).__name__} produced {rows} row(s) of image data for "
            f"{num_images} image(s), but its outputs assign {owned} "
            "row(s) per image; the rows cannot be attributed to images (Gemma3's "
            "do_pan_and_scan crops are one cause)."
        )
    return long_tensor(owned)
