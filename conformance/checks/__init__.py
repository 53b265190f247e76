"""The catalogue of checks. Each module has an ID, a one-line STATEMENT and `run(ctx, case)`.

A check returns an Outcome whose evidence names the first differing token, item or field.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from conformance.checks.base import Context, Outcome

CHECK_MODULES = {
    "prompt-ids": "prompt_ids",
    "placeholders": "placeholders",
    "embed-count": "embed_count",
    "cache": "cache",
    "slicing": "slicing",
    "errors": "errors",
}
CHECK_IDS = tuple(CHECK_MODULES)


def get_check(check_id: str) -> ModuleType:
    if check_id not in CHECK_MODULES:
        raise KeyError(f"unknown check {check_id!r} (known: {', '.join(CHECK_IDS)})")
    return importlib.import_module(f"conformance.checks.{CHECK_MODULES[check_id]}")


__all__ = ["CHECK_IDS", "Context", "Outcome", "get_check"]
