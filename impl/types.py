"""Plain result types of `impl.process`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import compress
from typing import Any


@dataclass(frozen=True)
class Placeholder:
    """Where one item sits in the expanded prompt.

    `embed_positions` are absolute prompt positions that receive the item's embeddings; a
    placeholder whose every position carries one lists the whole range.
    """

    offset: int
    length: int
    embed_positions: tuple[int, ...]


@dataclass(frozen=True)
class ProcessedPrompt:
    prompt_ids: tuple[int, ...]
    placeholders: dict[str, tuple[Placeholder, ...]]
    item_fields: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    item_hashes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def placeholder_from_mask(offset: int, is_embed: list[bool] | None, length: int) -> Placeholder:
    """`is_embed=None` stands for "every position of the range"."""
    if is_embed is None:
        positions = tuple(range(offset, offset + length))
    else:
        positions = tuple(compress(range(offset, offset + length), is_embed))
    return Placeholder(offset=offset, length=length, embed_positions=positions)
