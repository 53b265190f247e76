"""model: both implementations load the checkpoint and pick the same greedy next token for the
recipe's two-item prompt (a smoke check: the first thing to break when serving breaks)."""

from __future__ import annotations

from typing import Any

from conformance.checks.contract import Check, MediaHook, Outcome, Proof
from conformance.checks.model.generate import LOGPROB_ATOL, engine_decode, strict_difference
from conformance.checks.processing import items_per_prompt
from conformance.inputs.media import make_items
from conformance.subjects import vllm
from fixtures.recipe import Recipe


def run(recipe: Recipe, path: str, *, subject_media: MediaHook | None = None,
        device: str = "cpu", dtype: str = "float32", **_: Any) -> Outcome:
    modality, count = recipe.modalities[0], items_per_prompt(recipe)
    prompt, items = recipe.render_prompt(modality, count), make_items(modality, count)
    decoded = {}
    for impl in vllm.IMPLS:
        own = subject_media(items) if subject_media and impl == vllm.BACKEND else items
        # the engines `generate` decodes with (built once per checkpoint and implementation)
        decoded[impl] = engine_decode(recipe, path, impl, device, dtype, prompt, modality, own,
                                      tokens=1)
    native, backend = decoded[vllm.NATIVE], decoded[vllm.BACKEND]
    (native_token,), (backend_token,) = native.tokens, backend.tokens
    native_top = native.logprobs[0] if native.logprobs else {}
    backend_top = backend.logprobs[0] if backend.logprobs else {}
    data = {"native_token": native_token, "backend_token": backend_token}
    if native_token != backend_token:
        return Outcome.of(f"greedy token differs: native {native_token} (top-5 "
                          f"{sorted(native_top)}) vs backend {backend_token} (top-5 "
                          f"{sorted(backend_top)})", data)
    if dtype not in LOGPROB_ATOL:
        return Outcome.of(None, data)
    # in fp32 the same token is not enough: its top logprobs must agree within fp32 noise
    difference, measured = strict_difference(native, backend, LOGPROB_ATOL[dtype])
    return Outcome.of(difference, {**data, **measured})


CHECK = Check(
    id="model",
    statement="Both implementations load the checkpoint and pick the same greedy next token "
              "(in fp32 with the same top logprobs, within fp32 noise).",
    hint="the backend cannot load or run the model, or picks another token: start from the "
         "error, then compare the encoder and the embedding positions",
    level="checkpoint", run=run, needs_native=True, loads_model=True,
    proof=Proof("backend-logits-negated", "llava", "greedy token differs"),
)
