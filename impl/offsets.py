"""The offsets strategy (transformers >= 5.15): the HF processor reports, per item, the text
its placeholder expands to, and that expansion is re-applied to the unexpanded prompt."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np
import torch

from impl.fields import image_rows_per_item, long_tensor
from impl.hf import encode_plain
from impl.release import DEFAULT, OFFSETS_ONLY, VIDEO, Profile
from impl.replace import Replacement


def embed_token_id(ids: Sequence[int] | torch.Tensor) -> int:
    """The token an expansion repeats carries the embeddings: the most frequent id, the
    smallest of them on a tie (torch.mode's choice)."""
    values = ids.tolist() if isinstance(ids, torch.Tensor) else ids
    if not values:
        raise IndexError("an empty replacement has no embedding token")
    counts = Counter(values)
    return max(counts, key=lambda value: (counts[value], -value))


def target_token_ids(tokenizer: Any, token: str | int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(token, str):
        return tuple(encode_plain(tokenizer, token))
    if isinstance(token, int):
        return (token,)
    return tuple(token)


def offset_entries(offsets: Any) -> list[Mapping[str, Any]] | None:
    """The first (only) prompt's replacement entries, or None when there are none."""
    # an empty batch may come back as a tensor rather than a list
    if offsets is None or len(offsets) == 0 or len(offsets[0]) == 0:
        return None
    return list(offsets[0])


def missing_offsets_error(processor: Any, *, profile: Profile = DEFAULT) -> ValueError:
    """Before `OFFSETS_ONLY` an older transformers is a way out (the Legacy path); from then
    on there is none: the processor has to report offsets."""
    way_out = ("" if profile.has(OFFSETS_ONLY) else
               "; transformers<5.15.0 locates placeholders in the expanded prompt instead")
    return ValueError(
        f"{type(processor).__name__} reported no text_replacement_offsets for the media it "
        "was given, so no item's placeholder can be located. Its __call__ must go through "
        "ProcessorMixin.get_text_with_replacements with one replacement per item (usually by "
        f"implementing replace_<modality>_token){way_out}."
    )


def replacement_token_ids(
    tokenizer: Any, entries: Sequence[Mapping[str, Any]]
) -> dict[str, list[list[int]]]:
    """Per modality, in prompt order, the token ids each item's placeholder expands to."""
    result: dict[str, list[list[int]]] = {}
    for entry in entries:
        result.setdefault(entry["type"], []).append(encode_plain(tokenizer, entry["replacement"]))
    return result


def embed_counts(seqs: Sequence[Sequence[int]]) -> list[int]:
    """How many positions of each replacement carry an embedding."""
    return [list(seq).count(embed_token_id(seq)) for seq in seqs]


def record_replacements(
    hf_inputs: dict[str, Any],
    replacements: Mapping[str, list[list[int]]],
    processor: Any,
    images: Any,
    processor_kwargs: Mapping[str, Any] | None = None,
    *,
    profile: Profile = DEFAULT,
) -> None:
    """Store the replacements as per-item fields, with each item's row/token count. A video
    (`VIDEO`) owns its grid's cells (one row each without a grid) and counts the tokens its
    replacement embeds."""
    for modality, seqs in replacements.items():
        # through numpy: a tensor from a list of Python ints costs ~4x more
        hf_inputs[f"{modality}_replacement_ids"] = torch.from_numpy(
            np.fromiter(chain.from_iterable(seqs), dtype=np.int64)
        )
        hf_inputs[f"{modality}_replacement_sizes"] = long_tensor([len(seq) for seq in seqs])
        if modality == "image":
            hf_inputs["num_image_patches"] = image_rows_per_item(
                processor, hf_inputs, images, len(seqs), processor_kwargs
            )
        elif modality == "audio":
            hf_inputs["num_audio_tokens"] = torch.tensor(embed_counts(seqs))
        elif modality == "video" and profile.has(VIDEO):
            grid = hf_inputs.get("video_grid_thw")
            hf_inputs["num_video_patches"] = (
                grid.prod(-1) if grid is not None else torch.ones(len(seqs), dtype=torch.long))
            hf_inputs["num_video_tokens"] = torch.tensor(embed_counts(seqs))


def build_replacements(
    processor: Any,
    tokenizer: Any,
    items: Mapping[str, list[dict[str, Any]]],
) -> dict[str, list[Replacement]]:
    """One replacement per item. The replacement ids leave the item's fields here: they shape
    the prompt and never reach the model."""
    updates: dict[str, list[Replacement]] = {}
    for modality, modality_items in items.items():
        target = target_token_ids(tokenizer, getattr(processor, f"{modality}_token"))
        updates[modality] = []
        for index, fields in enumerate(modality_items):
            tokens = tuple(fields.pop(f"{modality}_replacement_ids").tolist())
            updates[modality].append(
                Replacement(
                    modality=modality,
                    item_index=index,
                    target=target,
                    tokens=tokens,
                    embed_token_id=embed_token_id(tokens),
                )
            )
    return updates


def bind_replacements(
    updates: Mapping[str, list[Replacement]], counts: Mapping[str, int]
) -> dict[str, list[Replacement]]:
    """Item i of each modality gets the modality's i-th replacement; surplus ones go unused."""
    bound: dict[str, list[Replacement]] = {}
    for modality, replacements in updates.items():
        wanted = counts.get(modality, 0)
        if wanted > len(replacements):
            raise IndexError(
                f"{wanted} {modality} item(s) but only {len(replacements)} replacement(s)"
            )
        bound[modality] = list(replacements[:wanted])
    return bound
