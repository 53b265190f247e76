"""From-scratch reference of vLLM 0.31.0's Transformers multimodal backend behaviour.

Imports only torch, numpy, transformers and the standard library.

The names below load on first use (PEP 562): `impl.version`, which the harness's own main
process reads, then costs no import of torch (about 2 s of every `conformance` command).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {"process": "impl.pipeline", "strategy_for": "impl.pipeline",
            "Placeholder": "impl.types", "ProcessedPrompt": "impl.types"}
__all__ = ["Placeholder", "ProcessedPrompt", "process", "strategy_for"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'impl' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name]), name)
