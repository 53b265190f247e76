"""The references of the model checks and which side a difference is attributed to.

A model check compares its subject (vLLM's backend; impl on the HF model) with every reference
the checkpoint has: native vLLM, where vLLM has a model of its own, and always transformers (the
HF model, `hf_reference`). With both, the references are compared with each other too, so a
difference says which side deviates from transformers.

Wording: a difference from native vLLM reads as it always has (findings match it); one from the
HF model starts with `vs hf:` and names `hf` where the other says `native`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from conformance.checks.contract import HF_REF, NATIVE_REF, REFERENCES
from conformance.checks.model.inputs import error_text
from conformance.core.vllms import current_label, impl_reproduces
from fixtures.recipe import Recipe

GENERATE_TOKENS = 4  # greedy steps each reference decodes
HF_PREFIX = "vs hf: "
# What each attribution appends to the differences it concerns (a finding may name the side)
DEVIATES = {
    "subject": "[the {subject} deviates: native vLLM agrees with the HF model]",
    "native": "[native vLLM deviates from the HF model; the {subject} agrees with the HF model]",
    "hf": "[the HF model differs from both vLLM implementations]",
    "all": "[all three differ: native vLLM and the HF model disagree too]",
}

T = TypeVar("T")


def subjects_compared() -> tuple[str, ...]:
    """The model checks' subjects on the vLLM under test: its backend, and impl on the HF model
    where impl reproduces that vLLM's backend (a release profile follows it:
    `vllms.impl_reproduces`)."""
    return ("backend", "impl") if impl_reproduces(current_label()) else ("backend",)


def references_of(recipe: Recipe, only: Sequence[str] | None = None) -> tuple[str, ...]:
    """The references a checkpoint has (`only`: those of them a caller asks for)."""
    refs = ((NATIVE_REF,) if recipe.native_in_vllm else ()) + (HF_REF,)
    return tuple(r for r in refs if only is None or r in only)


def attribution(subject_vs: Mapping[str, bool], native_vs_hf: bool | None) -> str | None:
    """Which side deviates, from whether the subject differs from each reference and whether
    the references differ from each other (None: nothing to attribute)."""
    if native_vs_hf is None or not any(subject_vs.values()):
        return None
    native, hf = subject_vs.get(NATIVE_REF, False), subject_vs.get(HF_REF, False)
    if native and hf:
        return "all" if native_vs_hf else "subject"
    return "native" if native else "hf"


def run_references(refs: Sequence[str], produce: Callable[[str], T],
                   data: dict[str, Any]) -> dict[str, T]:
    """Each reference's output; one that raises is recorded in `data` and left out. With no
    reference left, the first error is the check's (an oracle that cannot run)."""
    outputs: dict[str, T] = {}
    errors: list[Exception] = []
    for ref in refs:
        try:
            outputs[ref] = produce(ref)
        except Exception as error:
            data.setdefault(REFERENCES, {})[ref] = f"error: {error_text(error)}"
            errors.append(error)
    if not outputs and errors:
        raise errors[0]
    return outputs


def worded(ref: str, difference: str) -> str:
    """A difference from `ref`, in the wording that names it."""
    if ref == NATIVE_REF:
        return difference
    return HF_PREFIX + difference


def three_way(subject: str, outputs: Mapping[str, T], actual: T,
              compare: Callable[[T, T, str, str], list[str]], data: dict[str, Any]) -> list[str]:
    """The subject's differences from every reference, each attributed where both exist.

    `compare(expected, actual, reference_name, subject_name)` lists differences worded with
    those names."""
    found = {ref: compare(expected, actual, ref, subject) for ref, expected in outputs.items()}
    between = None
    if NATIVE_REF in outputs and HF_REF in outputs:
        between = compare(outputs[HF_REF], outputs[NATIVE_REF], HF_REF, NATIVE_REF)
    side = attribution({ref: bool(p) for ref, p in found.items()},
                       None if between is None else bool(between))
    relation = data.setdefault(REFERENCES, {})
    for ref, problems in found.items():
        relation[f"{subject} vs {ref}"] = "differs" if problems else "agrees"
    if between is not None:
        relation["native vs hf"] = "differ" if between else "agree"
        if between:
            relation["native vs hf, first"] = between[0][:300]
    suffix = f" {DEVIATES[side].format(subject=subject)}" if side else ""
    if side:
        data.setdefault("deviates", {})[subject] = side
    return [worded(ref, p) + suffix for ref, problems in found.items() for p in problems]


def merged_relations(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Several comparisons' `references` (one per prompt) as one: a relation differs where any
    prompt's does; the first difference between the references is kept."""
    merged: dict[str, str] = {}
    for row in rows:
        for key, value in row.get(REFERENCES, {}).items():
            if key not in merged or (value != "agrees" and value != "agree"
                                     and not key.endswith(", first")
                                     and merged[key] in ("agrees", "agree")):
                merged[key] = value
    return merged


@dataclass(frozen=True)
class Decoded:
    prompt_ids: tuple[int, ...]
    tokens: tuple[int, ...]
    logprobs: tuple[dict[int, float], ...]  # per step, the top logprobs (and the chosen one)
