"""The processor cache's key of an item: a hash of the item as the request gives it.

vLLM hashes each input item (an image's pixels and mode, an audio's samples and rate) together
with the model and the processor options, never the processed fields: an item's key is known
before it is processed, which is what lets a cached item skip the HF processor.

A video (`VIDEO`) is hashed as parsing leaves it: its frames, with its metadata where the
video processor reads it (vLLM's parser keeps the (frames, metadata) pair only then, and
hashes the item it keeps), so metadata the processor never sees does not split the cache.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch


def _feed(digest: Any, value: Any) -> None:
    if hasattr(value, "tobytes") and hasattr(value, "mode") and hasattr(value, "size"):
        digest.update(f"image|{value.mode}|{tuple(value.size)}|".encode())  # a PIL image
        digest.update(value.tobytes())
        return
    if isinstance(value, torch.Tensor):  # bytes as stored: numpy has no bfloat16
        tensor = value.detach().cpu().contiguous()
        digest.update(f"tensor|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        digest.update(f"array|{array.dtype}|{array.shape}|".encode())
        digest.update(array.tobytes())
    elif isinstance(value, (list, tuple)):
        digest.update(f"seq|{len(value)}|".encode())
        for element in value:
            _feed(digest, element)
    elif isinstance(value, Mapping):
        digest.update(f"map|{len(value)}|".encode())
        for key in sorted(value, key=str):
            digest.update(f"{key}\0".encode())
            _feed(digest, value[key])
    else:
        digest.update(f"value|{value!r}|".encode())


# The option groups the HF processor reads for one modality alone
MODALITY_SCOPES = {"image": "images_kwargs", "video": "videos_kwargs", "audio": "audio_kwargs"}


def request_factors(modality: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """The request's options an item of `modality` is keyed by: all but the groups scoped to
    another modality (its own group and every flat option reach its processing; another
    modality's group cannot change it, so it does not split the cache)."""
    own = MODALITY_SCOPES.get(modality)
    if own is None:  # a modality with no group of its own: every option may reach it
        return dict(request)
    others = set(MODALITY_SCOPES.values()) - {own}
    return {key: value for key, value in request.items() if key not in others}


def media_hash(model_id: str, modality: str, item: Any, options: Mapping[str, Any],
               request: Mapping[str, Any] | None = None) -> str:
    """sha256 of the model, the modality, the input item, the model-level processor options
    and the request's own that can reach the item (`request`: vLLM keys an item by the options
    its request gave, so one cache never serves an item processed under other request options;
    `request_factors`)."""
    digest = hashlib.sha256()
    digest.update(f"{model_id}\0{modality}\0".encode())
    _feed(digest, item)
    _feed(digest, dict(options))
    request = request_factors(modality, request or {})
    if request:  # fed only when given: a request without options keeps the key it always had
        digest.update(b"request\0")
        _feed(digest, dict(request))
    return digest.hexdigest()


def media_hashes(
    model_id: str, media: Mapping[str, list[Any]], options: Mapping[str, Any],
    request: Mapping[str, Any] | None = None,
) -> dict[str, tuple[str, ...]]:
    return {
        modality: tuple(media_hash(model_id, modality, item, options, request) for item in items)
        for modality, items in media.items()
    }


class ItemHashes(Mapping[str, tuple[str, ...]]):
    """Per modality, each item's hash, computed on first read.

    Only the cache check reads them; hashing every item's bytes up front cost a quarter of
    impl's own time per prompt (benchmarks/run.py --only overhead). A mapping like the dict it
    stands for: equal to a dict with the same hashes, printed as one.
    """

    def __init__(self, compute: Callable[[], dict[str, tuple[str, ...]]]) -> None:
        self._compute = compute
        self._hashes: dict[str, tuple[str, ...]] | None = None

    def _computed(self) -> dict[str, tuple[str, ...]]:
        if self._hashes is None:
            self._hashes = self._compute()
        return self._hashes

    def __getitem__(self, modality: str) -> tuple[str, ...]:
        return self._computed()[modality]

    def __iter__(self) -> Iterator[str]:
        return iter(self._computed())

    def __len__(self) -> int:
        return len(self._computed())

    def __repr__(self) -> str:
        return repr(self._computed())
