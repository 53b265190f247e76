"""processing: native vLLM and the backend expand the recipe's two-item prompt alike.

Both processors come from vLLM's registry for the same checkpoint, differing only in
`model_impl`; they must give the same token ids and the same placeholder ranges (offset, length,
embedding positions). Without a native vLLM model the HF processor's expansion is the oracle.
"""

from __future__ import annotations

import re

from conformance.checks.contract import Check, MediaHook, Outcome, Proof
from conformance.checks.differences import describe, prompt_differences
from conformance.core.subjects import HF, VLLM_BACKEND
from conformance.inputs.cases import Case
from conformance.inputs.media import audio_rate, mm_data, smoke_media
from conformance.subjects import make_subject, vllm
from fixtures.recipe import Recipe

ITEMS_PER_PROMPT = 2


def items_per_prompt(recipe: Recipe) -> int:
    return min(ITEMS_PER_PROMPT, recipe.max_items)


def smoke_case(recipe: Recipe, path: str) -> Case:
    """The recipe's two-item prompt as a case (for the subjects' adapters), its audio at the
    checkpoint's rate."""
    modality, count = recipe.modalities[0], items_per_prompt(recipe)
    placeholder = recipe.placeholder[modality]
    if placeholder:
        segments = tuple(re.split(r"\{\d\}", recipe.render_prompt(modality, count).replace(
            placeholder, "{0}")))
    else:  # the model places its items itself (PaliGemma): the prompt is plain text
        segments = (recipe.render_prompt(modality, count), *[""] * count)
    return Case(recipe.name, modality, segments,
                smoke_media(modality, count, audio_rate(recipe, path)))


def against_hf(recipe: Recipe, path: str) -> Outcome:
    """Without a native vLLM model the HF processor's own expansion is the oracle."""
    case = smoke_case(recipe, path)
    expected = make_subject(HF, path, recipe).process(case)
    actual = make_subject(VLLM_BACKEND, path, recipe).process(case)
    found = prompt_differences(expected, actual, ("hf", "backend"))
    outcome = Outcome.judged([f"vs hf: {d}" for d in found], set())
    outcome.measured = {"oracle": "hf", "prompt_len": len(expected.prompt_ids)}
    return outcome


def run(recipe: Recipe, path: str, *, subject_media: MediaHook | None = None,
        **_: object) -> Outcome:
    if not recipe.native_in_vllm:
        return against_hf(recipe, path)
    case = smoke_case(recipe, path)
    modality, limits = case.modality, {case.modality: len(case.media)}
    prompt = recipe.render_prompt(modality, len(case.media))
    results = {}
    for impl in vllm.IMPLS:
        items = case.items()
        if impl == vllm.BACKEND and subject_media:
            items = subject_media(items)
        processor = vllm.create_processor(path, impl, limits)
        results[impl] = vllm.from_vllm_output(vllm.apply(
            processor, prompt, mm_data(modality, items, case.media[0].rate)))
    native, backend = results[vllm.NATIVE], results[vllm.BACKEND]
    data = {
        "prompt_len": len(native.prompt_ids),
        "native": {m: [describe(p) for p in ps] for m, ps in native.placeholders.items()},
        "backend": {m: [describe(p) for p in ps] for m, ps in backend.placeholders.items()},
    }
    outcome = Outcome.judged(prompt_differences(native, backend, ("native", "backend")), set())
    outcome.measured = data
    return outcome


CHECK = Check(
    id="processing",
    statement="Native vLLM and the backend expand the recipe's two-item prompt into the same "
              "ids and placeholders.",
    hint="native vLLM and the backend expand the recipe prompt differently: compare the HF "
         "processor's replacement text with what native vLLM inserts",
    level="checkpoint", run=run,
    compared_with="native vLLM, else the HF processor",
    proof=Proof("backend-offset-shift", "llava", "ranges differ"),
    matrix_fault="backend-offset-shift",
)
