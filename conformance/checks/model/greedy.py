"""model: the backend loads the checkpoint and picks the same greedy next token as its
references (native vLLM where vLLM has a model of its own, and the HF model) for the recipe's
two-item prompt (a smoke check: the first thing to break when serving breaks)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.checks.contract import (
    MODEL_REFERENCES,
    PROBLEMS,
    Check,
    MediaHook,
    NotApplicable,
    Proof,
    returning_outcome,
)
from conformance.checks.model.generate import (
    Decoded,
    compared_decodings,
    not_decoding,
    text_only,
)
from conformance.checks.model.references import HF_REF
from conformance.checks.processing import items_per_prompt
from conformance.core.subjects import VLLM_BACKEND
from conformance.inputs.media import audio_rate, make_items
from fixtures.recipe import Recipe


def greedy_difference(expected: Decoded, actual: Decoded, ref: str, subject: str) -> str | None:
    """The first step's token, as the smoke check words it (the logprobs follow)."""
    (want,), (got,) = expected.tokens[:1] or (None,), actual.tokens[:1] or (None,)
    if want == got:
        return None
    top = expected.logprobs[0] if expected.logprobs else {}
    mine = actual.logprobs[0] if actual.logprobs else {}
    return (f"greedy token differs: {ref} {want} (top-5 {sorted(top)}) vs {subject} {got} "
            f"(top-5 {sorted(mine)})")


def check_model(recipe: Recipe, path: str, *, subject_media: MediaHook | None = None,
                device: str = "cpu", dtype: str = "float32",
                references: Sequence[str] | None = None) -> tuple[str | None, dict]:
    """One greedy step on the engines `generate` decodes with (built once per checkpoint and
    implementation): the token, and in fp32 its top logprobs within fp32 noise."""
    if recipe.pooling:
        raise NotApplicable(not_decoding(recipe))
    modality, count = recipe.modalities[0], items_per_prompt(recipe)
    prompt = recipe.render_prompt(modality, count)
    items = make_items(modality, count, audio_rate(recipe, path))
    own = subject_media(list(items)) if subject_media else items
    data: dict[str, Any] = {}
    problems = compared_decodings(recipe, path, device, dtype, prompt, modality, own, items,
                                  data, references, tokens=1, first=greedy_difference)
    problems += text_only(recipe, path, device, dtype, modality, data, references, tokens=1,
                          first=greedy_difference)
    data[PROBLEMS] = problems
    return (problems[0] if problems else None), data


CHECK = Check(
    id="model",
    statement="The backend loads the checkpoint and picks the same greedy next token as each "
              "reference, on the recipe's prompt and on a text-only one (in fp32 with the same "
              "top logprobs, within fp32 noise).",
    hint="the backend cannot load or run the model, or picks another token: start from the "
         "error, then compare the encoder and the embedding positions",
    level="checkpoint", run=returning_outcome(check_model), loads_model=True,
    compared_with=MODEL_REFERENCES,
    proof=Proof("backend-logits-negated", "llava", "greedy token differs"),
    matrix_fault="backend-logits-negated",
    more_proofs=(Proof("backend-logits-negated", "aya_vision", "vs hf: greedy token differs",
                       subject=VLLM_BACKEND, sub_property=HF_REF),
                 # the fp32 bound: the same token, its logprob off by about 1e-3
                 Proof("backend-logits-scaled", "llava", "logprob of token",
                       subject=VLLM_BACKEND),),
)
