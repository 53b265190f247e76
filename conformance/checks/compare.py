"""Equality of processed outputs with evidence: the first differing field, item or token."""

from __future__ import annotations

from typing import Any

import torch

from conformance.checks.base import ids_difference, placeholders_difference
from impl.types import ProcessedPrompt


def value_difference(expected: Any, actual: Any, where: str) -> str | None:
    if isinstance(expected, torch.Tensor) or isinstance(actual, torch.Tensor):
        if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)):
            return f"{where}: {type(expected).__name__} vs {type(actual).__name__}"
        if expected.shape != actual.shape:
            return f"{where}: shape {list(expected.shape)} vs {list(actual.shape)}"
        if expected.dtype != actual.dtype:
            return f"{where}: dtype {expected.dtype} vs {actual.dtype}"
        if not torch.equal(expected, actual):
            diff = (expected.double() - actual.double()).abs()
            first = [int(i) for i in torch.nonzero(diff)[0].tolist()]
            return f"{where}: values differ (max abs {diff.max().item():.3g}, first at {first})"
        return None
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        if len(expected) != len(actual):
            return f"{where}: {len(expected)} entries vs {len(actual)}"
        for i, (x, y) in enumerate(zip(expected, actual, strict=True)):
            if difference := value_difference(x, y, f"{where}[{i}]"):
                return difference
        return None
    if isinstance(expected, dict) and isinstance(actual, dict):
        if set(expected) != set(actual):
            return f"{where}: fields {sorted(expected)} vs {sorted(actual)}"
        for key in sorted(expected):
            if difference := value_difference(expected[key], actual[key], f"{where}.{key}"):
                return difference
        return None
    return None if expected == actual else f"{where}: {expected!r} vs {actual!r}"


def item_fields_difference(expected: dict, actual: dict, where: str) -> str | None:
    return value_difference(expected, actual, where)


def output_difference(expected: ProcessedPrompt, actual: ProcessedPrompt) -> str | None:
    """Everything a request's processing yields: ids, placeholders, per-item fields, hashes."""
    if difference := ids_difference(expected.prompt_ids, actual.prompt_ids):
        return difference
    if difference := placeholders_difference(expected, actual):
        return difference
    for modality in sorted(set(expected.item_fields) | set(actual.item_fields)):
        mine = expected.item_fields.get(modality, [])
        theirs = actual.item_fields.get(modality, [])
        if difference := value_difference(mine, theirs, f"{modality} fields"):
            return difference
    if expected.item_hashes != actual.item_hashes:
        return f"item hashes differ: {expected.item_hashes} vs {actual.item_hashes}"
    return None
