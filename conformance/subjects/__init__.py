"""Subjects and oracles: one small adapter each, all answering with `impl.ProcessedPrompt`.

- `impl`: our reference implementation (optionally with a planted fault, see faults.py);
- `vllm-backend`: vLLM's in-tree Transformers backend processor (`model_impl="transformers"`);
- `vllm-native`: vLLM's native processor for the architecture (the oracle);
- `hf`: the HF processor's own expansion, a second oracle that needs no vLLM model.
"""

from __future__ import annotations

from typing import Any

from fixtures.recipe import Recipe

SUBJECTS = ("impl", "vllm-backend")
ORACLES = ("vllm-native", "hf")


def make_subject(name: str, path: str, recipe: Recipe, fault: str | None = None) -> Any:
    from conformance.subjects import vllm

    if name == "impl":
        from conformance.subjects.impl import ImplSubject

        return ImplSubject(path, recipe, fault)
    if name == "vllm-backend":
        return vllm.VllmSubject(name, vllm.BACKEND, path, recipe)
    if name == "vllm-native":
        return vllm.VllmSubject(name, vllm.NATIVE, path, recipe)
    if name == "hf":
        from conformance.subjects.hf import HfSubject

        return HfSubject(path, recipe)
    raise KeyError(f"unknown subject {name!r} (known: {', '.join(SUBJECTS + ORACLES)})")
