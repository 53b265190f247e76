"""generate: a few greedy tokens with logprobs of the backend agree with native vLLM's: in fp32
every decoded position's top logprobs within fp32 noise (`LOGPROB_ATOL`), in lower precisions
under vLLM tests' `check_logprobs_close` rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from conformance.checks.contract import Check, MediaHook, Proof, returning_outcome
from conformance.checks.model.inputs import error_text, two_item_inputs
from conformance.checks.model.loading import (
    BACKEND,
    CACHE,
    NATIVE,
    cache_key,
    ensure_distributed,
    llm,
    require_native,
)
from conformance.inputs.media import mm_data
from fixtures.recipe import Recipe

GENERATE_TOKENS = 4
TOP_LOGPROBS = 5
# fp32 on CPU: the largest logprob difference measured between native vLLM and the backend on
# the fixtures whose prompts and items agree is 4.8e-7 (qwen2_vl, qwen2_5_vl; the rest 0.0): a
# bound 200x that is fp32 noise with room, and far below a missing input (qwen3_vl's DeepStack
# features move the top logprob by about 4e-3). Lower precisions keep vLLM's lenient rule.
LOGPROB_ATOL = {"float32": 1e-4}

@dataclass(frozen=True)
class Decoded:
    prompt_ids: tuple[int, ...]
    tokens: tuple[int, ...]
    logprobs: tuple[dict[int, float], ...]  # per step, the top logprobs (and the chosen one)


def decode(engine: Any, prompt: str, modality: str, items: list,
           tokens: int = GENERATE_TOKENS) -> Decoded:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=tokens, logprobs=TOP_LOGPROBS)
    request = {"prompt": prompt, "multi_modal_data": mm_data(modality, items)}
    (result,) = engine.generate(request, params, use_tqdm=False)
    completion = result.outputs[0]
    steps = tuple({int(k): float(v.logprob) for k, v in (top or {}).items()}
                  for top in completion.logprobs or ())
    return Decoded(tuple(result.prompt_token_ids), tuple(completion.token_ids), steps)


def logprobs_difference(native: Decoded, backend: Decoded) -> tuple[str | None, dict]:
    """vLLM tests' `check_logprobs_close`: equal tokens, or at the first divergence each
    side's token is in the other's top logprobs; nothing after it is compared."""
    deltas: list[float] = []
    data: dict[str, Any] = {"native_tokens": list(native.tokens),
                            "backend_tokens": list(backend.tokens),
                            "prompt_ids_equal": native.prompt_ids == backend.prompt_ids}
    if len(native.tokens) != len(backend.tokens):
        data["max_logprob_diff"] = None
        return (f"native decoded {len(native.tokens)} tokens, backend {len(backend.tokens)}",
                data)
    difference = None
    for step, (a, b) in enumerate(zip(native.tokens, backend.tokens, strict=True)):
        mine, theirs = native.logprobs[step], backend.logprobs[step]
        if a == b:
            deltas.append(abs(mine[a] - theirs[b]))
            continue
        data["diverged_at"] = step
        if a not in theirs or b not in mine:
            difference = (f"step {step}: native token {a} ({mine.get(a, float('nan')):.4f}) "
                          f"vs backend token {b} ({theirs.get(b, float('nan')):.4f}); native "
                          f"top-{TOP_LOGPROBS} {sorted(mine)}, backend top-{TOP_LOGPROBS} "
                          f"{sorted(theirs)}")
        break
    data["max_logprob_diff"] = max(deltas) if deltas else None
    return difference, data


def strict_difference(native: Decoded, backend: Decoded, atol: float) -> tuple[str | None, dict]:
    """Every decoded position: the same token, the same top tokens, each logprob within
    `atol`."""
    deltas: list[float] = [0.0]
    data: dict[str, Any] = {"native_tokens": list(native.tokens),
                            "backend_tokens": list(backend.tokens),
                            "prompt_ids_equal": native.prompt_ids == backend.prompt_ids,
                            "logprob_atol": atol}
    difference = None
    if len(native.tokens) != len(backend.tokens):
        difference = f"native decoded {len(native.tokens)} tokens, backend {len(backend.tokens)}"
    for step, (a, b) in enumerate(zip(native.tokens, backend.tokens, strict=False)):
        mine, theirs = native.logprobs[step], backend.logprobs[step]
        shared = sorted(set(mine) & set(theirs))
        deltas += [abs(mine[t] - theirs[t]) for t in shared]
        if difference:
            break
        if a != b:
            difference = (f"step {step}: native token {a} ({mine.get(a, float('nan')):.4f}) vs "
                          f"backend token {b} ({theirs.get(b, float('nan')):.4f})")
        elif (worst := max(shared, key=lambda t: abs(mine[t] - theirs[t]), default=None)) \
                is not None and abs(mine[worst] - theirs[worst]) > atol:
            difference = (f"step {step}: logprob of token {worst} native {mine[worst]:.6f} vs "
                          f"backend {theirs[worst]:.6f} (off by "
                          f"{abs(mine[worst] - theirs[worst]):.2e}, fp32 bound {atol:g})")
        elif set(mine) != set(theirs):
            difference = (f"step {step}: top-{TOP_LOGPROBS} tokens native {sorted(mine)} vs "
                          f"backend {sorted(theirs)}")
    data["max_logprob_diff"] = max(deltas)
    if difference and not data["prompt_ids_equal"]:
        difference = (f"prompt ids differ (native {len(native.prompt_ids)} tokens, backend "
                      f"{len(backend.prompt_ids)}); {difference}")
    return difference, data


def compare_decoded(native: Decoded, backend: Decoded, dtype: str) -> tuple[str | None, dict]:
    """The strict fp32 rule where the precision has one, else vLLM tests' lenient rule."""
    if dtype in LOGPROB_ATOL:
        return strict_difference(native, backend, LOGPROB_ATOL[dtype])
    return logprobs_difference(native, backend)


def engine_decode(recipe: Recipe, path: str, impl: str, device: str, dtype: str,
                  prompt: str, modality: str, items: list,
                  tokens: int = GENERATE_TOKENS) -> Decoded:
    """Greedy decoding on the process's engine for `impl` (one per implementation, shared by
    every model check of the checkpoint: building engines is most of their time)."""
    engine = llm(recipe, path, impl, device, dtype)
    ensure_distributed()  # a collected engine may have torn it down
    try:
        return decode(engine, prompt, modality, items, tokens)
    except Exception:
        # an in-process engine that failed mid-step is not trusted again
        model_key = cache_key("model", path, impl, device, dtype)
        if getattr(CACHE.entries.get(model_key), "engine", None) is engine:
            CACHE.drop(key=model_key)
        CACHE.drop(key=cache_key("llm", path, impl, device, dtype))
        raise


def check_generate(recipe: Recipe, path: str, *, device: str = "cpu", dtype: str = "float32",
                   subject_media: MediaHook | None = None) -> tuple[str | None, dict]:
    """Greedy decoding with logprobs on the recipe's two-item prompt, backend vs native; the
    backend failing (to load or to decode) is evidence, native failing ends the check."""
    require_native(recipe)
    modality, prompt, items = two_item_inputs(recipe, path)
    native = engine_decode(recipe, path, NATIVE, device, dtype, prompt, modality, items)
    subject_items = subject_media(list(items)) if subject_media else items
    try:
        backend = engine_decode(recipe, path, BACKEND, device, dtype, prompt, modality,
                                subject_items)
    except Exception as error:
        return f"backend: {error_text(error)}", {"native_tokens": list(native.tokens),
                                                 "backend": {"error": error_text(error)}}
    return compare_decoded(native, backend, dtype)


CHECK = Check(
    id="generate",
    statement="Greedy decoding of the backend agrees with native vLLM's: in fp32 every "
              "position's top logprobs within fp32 noise, else vLLM tests' check_logprobs_close.",
    hint="the backend decodes other tokens than native vLLM: look at the embedding positions "
         "and the M-RoPE positions first, then at the decoder's inputs",
    level="checkpoint", run=returning_outcome(check_generate), needs_native=True, loads_model=True,
    proof=Proof("backend-logits-negated", "llava", "step 0: native token"),
)
