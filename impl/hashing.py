"""Content hash of one processed item, over its own field values only."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch


def _feed(digest: Any, value: Any) -> None:
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(np.ascontiguousarray(value))
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu().contiguous()
        digest.update(f"tensor|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, (list, tuple)):
        digest.update(f"seq|{len(value)}|".encode())
        for element in value:
            _feed(digest, element)
    else:
        digest.update(f"value|{value!r}|".encode())


def item_hash(fields: Mapping[str, Any]) -> str:
    """sha256 over (name, dtype, shape, bytes) of each field, in name order."""
    digest = hashlib.sha256()
    for name in sorted(fields):
        digest.update(f"{name}\0".encode())
        _feed(digest, fields[name])
    return digest.hexdigest()


class ItemHashes(Mapping[str, tuple[str, ...]]):
    """Per modality, the `item_hash` of each item, computed on first read.

    Only the cache check reads them; hashing every processed item's bytes up front cost a
    quarter of impl's own time per prompt (benchmarks/run.py --only overhead). A mapping like
    the dict it replaces: equal to a dict with the same hashes, printed as one.
    """

    def __init__(self, items: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
        self._items = items
        self._hashes: dict[str, tuple[str, ...]] | None = None

    def _computed(self) -> dict[str, tuple[str, ...]]:
        if self._hashes is None:
            self._hashes = {
                m: tuple(item_hash(f) for f in fields) for m, fields in self._items.items()
            }
        return self._hashes

    def __getitem__(self, modality: str) -> tuple[str, ...]:
        return self._computed()[modality]

    def __iter__(self) -> Iterator[str]:
        return iter(self._computed())

    def __len__(self) -> int:
        return len(self._computed())

    def __repr__(self) -> str:
        return repr(self._computed())
