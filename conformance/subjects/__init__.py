"""Subjects and oracles: one small adapter each, all answering with `impl.ProcessedPrompt`
(`protocol.Subject`).

- `impl`: our reference implementation (optionally with a planted fault, see faults/);
- `vllm-backend`: vLLM's in-tree Transformers backend processor (`model_impl="transformers"`);
- `vllm-native`: vLLM's native processor for the architecture (the oracle);
- `hf`: the HF processor's own expansion, a second oracle that needs no vLLM model.

A new subject is one module implementing `Subject` and one line in `REGISTRY`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conformance.core.subjects import HF, IMPL, ORACLES, SUBJECTS, VLLM_BACKEND, VLLM_NATIVE
from conformance.subjects import vllm
from conformance.subjects.hf import HfSubject
from conformance.subjects.impl import ImplSubject
from conformance.subjects.protocol import PLANTS_FAULTS, Subject
from fixtures.recipe import Recipe

if TYPE_CHECKING:
    from conformance.subjects.faults import Fault

__all__ = ["ORACLES", "REGISTRY", "SUBJECTS", "Subject", "make_subject", "plants_faults"]

# name -> class: one line per subject
REGISTRY: dict[str, type] = {
    IMPL: ImplSubject,
    VLLM_BACKEND: vllm.BackendSubject,
    VLLM_NATIVE: vllm.NativeSubject,
    HF: HfSubject,
}


def subject_class(name: str) -> type:
    if name not in REGISTRY:
        raise KeyError(f"unknown subject {name!r} (known: {', '.join(REGISTRY)})")
    return REGISTRY[name]


def plants_faults(name: str) -> bool:
    """Whether the subject `name` plants a fault itself, per call (else a fault that targets
    it is planted around its whole cell)."""
    return name in REGISTRY and PLANTS_FAULTS in REGISTRY[name].capabilities


def make_subject(name: str, path: str, recipe: Recipe, fault: Fault | None = None) -> Subject:
    """The subject `name` on the checkpoint at `path`; `fault` goes to a subject that plants
    faults itself (the others ignore it: `run/cell.py` plants it around their cell)."""
    cls = subject_class(name)
    return cls(path, recipe, fault=fault) if plants_faults(name) else cls(path, recipe)
