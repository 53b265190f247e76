"""Content hash of one processed item, over its own field values only."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
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
