"""The processor cache: processed items kept under their input's hash (`impl.hashing`).

A request's items found in the cache are not processed again; the others are processed
together, without the cached ones, and stored. What is kept for an item is every field the
processor gave it, its replacement ids included: the prompt is expanded from them on a hit.
The Legacy path never consults it (the backend processes the whole prompt in one call there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int


class ProcessorCache:
    """Items by hash, with the count of lookups that found one (hits) and did not (misses)."""

    def __init__(self) -> None:
        self._items: dict[str, dict[str, Any]] = {}
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> dict[str, Any] | None:
        found = self._items.get(key)
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        return dict(found)  # a copy: expanding the prompt pops the replacement ids from it

    def put(self, key: str, fields: dict[str, Any]) -> None:
        self._items[key] = dict(fields)

    def make_stats(self) -> CacheStats:
        return CacheStats(self.hits, self.misses)
