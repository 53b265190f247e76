"""generate: a few greedy tokens with logprobs of the backend agree with native vLLM's: in fp32
every decoded position's top logprobs within fp32 noise (`LOGPROB_ATOL`), in lower precisions
under vLLM tests' `check_logprobs_close` rule."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
from conformance.checks.model import hf_reference
from conformance.checks.model.inputs import error_text, two_item_inputs
from conformance.checks.model.loading import (
    BACKEND,
    CACHE,
    NATIVE,
    cache_key,
    ensure_distributed,
    llm,
)
from conformance.checks.model.references import (
    GENERATE_TOKENS,
    HF_PREFIX,
    HF_REF,
    NATIVE_REF,
    Decoded,
    references_of,
    run_references,
    three_way,
)
from conformance.checks.model.reproducer import TOP_LOGPROBS
from conformance.core.subjects import VLLM_BACKEND
from conformance.inputs.media import SAMPLING_RATE, audio_rate, mm_data
from fixtures.recipe import Recipe

# fp32 on CPU: the largest logprob difference any passing model/generate cell of the baseline
# measured (each side against native vLLM and the HF model, every version) is 9.5e-7 (pixtral,
# qwen2_5_vl; most 0.0 or 4.8e-7): a bound 10x that is fp32 noise with room. It must stay
# below 4e-5: a bf16 cast of the embeddings moves logprobs by 4.9e-5 and an M-RoPE token type
# off by one by 4.2e-5 (mutation benchmark); a missing input (qwen3_vl's DeepStack features)
# by about 4e-3. Lower precisions keep vLLM's lenient rule.
LOGPROB_ATOL = {"float32": 1e-5}

def decode(engine: Any, prompt: str, modality: str, items: list,
           tokens: int = GENERATE_TOKENS, rate: int = SAMPLING_RATE) -> Decoded:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=tokens, logprobs=TOP_LOGPROBS)
    request = {"prompt": prompt, "multi_modal_data": mm_data(modality, items, rate)}
    (result,) = engine.generate(request, params, use_tqdm=False)
    completion = result.outputs[0]
    steps = tuple({int(k): float(v.logprob) for k, v in (top or {}).items()}
                  for top in completion.logprobs or ())
    return Decoded(tuple(result.prompt_token_ids), tuple(completion.token_ids), steps)


def logprobs_difference(native: Decoded, backend: Decoded, ref: str = "native",
                        subject: str = "backend") -> tuple[str | None, dict]:
    """vLLM tests' `check_logprobs_close`: equal tokens, or at the first divergence each
    side's token is in the other's top logprobs; nothing after it is compared. `ref` and
    `subject` name the two sides in the evidence."""
    deltas: list[float] = []
    data: dict[str, Any] = {f"{ref}_tokens": list(native.tokens),
                            f"{subject}_tokens": list(backend.tokens),
                            "prompt_ids_equal": native.prompt_ids == backend.prompt_ids}
    if len(native.tokens) != len(backend.tokens):
        data["max_logprob_diff"] = None
        return (f"{ref} decoded {len(native.tokens)} tokens, {subject} {len(backend.tokens)}",
                data)
    difference = None
    for step, (a, b) in enumerate(zip(native.tokens, backend.tokens, strict=True)):
        mine, theirs = native.logprobs[step], backend.logprobs[step]
        if a == b:
            deltas.append(abs(mine[a] - theirs[b]))
            continue
        data["diverged_at"] = step
        if a not in theirs or b not in mine:
            difference = (f"step {step}: {ref} token {a} ({mine.get(a, float('nan')):.4f}) "
                          f"vs {subject} token {b} ({theirs.get(b, float('nan')):.4f}); {ref} "
                          f"top-{TOP_LOGPROBS} {sorted(mine)}, {subject} top-{TOP_LOGPROBS} "
                          f"{sorted(theirs)}")
        break
    data["max_logprob_diff"] = max(deltas) if deltas else None
    return difference, data


def strict_difference(native: Decoded, backend: Decoded, atol: float, ref: str = "native",
                      subject: str = "backend") -> tuple[str | None, dict]:
    """Every decoded position: the same token, the same top tokens, each logprob within
    `atol`. `ref` and `subject` name the two sides in the evidence."""
    deltas: list[float] = [0.0]
    data: dict[str, Any] = {f"{ref}_tokens": list(native.tokens),
                            f"{subject}_tokens": list(backend.tokens),
                            "prompt_ids_equal": native.prompt_ids == backend.prompt_ids,
                            "logprob_atol": atol}
    difference = None
    if len(native.tokens) != len(backend.tokens):
        difference = (f"{ref} decoded {len(native.tokens)} tokens, {subject} "
                      f"{len(backend.tokens)}")
    for step, (a, b) in enumerate(zip(native.tokens, backend.tokens, strict=False)):
        mine, theirs = native.logprobs[step], backend.logprobs[step]
        shared = sorted(set(mine) & set(theirs))
        deltas += [abs(mine[t] - theirs[t]) for t in shared]
        if difference:
            break
        if a != b:
            difference = (f"step {step}: {ref} token {a} ({mine.get(a, float('nan')):.4f}) vs "
                          f"{subject} token {b} ({theirs.get(b, float('nan')):.4f})")
        elif (worst := max(shared, key=lambda t: abs(mine[t] - theirs[t]), default=None)) \
                is not None and abs(mine[worst] - theirs[worst]) > atol:
            difference = (f"step {step}: logprob of token {worst} {ref} {mine[worst]:.6f} vs "
                          f"{subject} {theirs[worst]:.6f} (off by "
                          f"{abs(mine[worst] - theirs[worst]):.2e}, fp32 bound {atol:g})")
            if (scale := logit_scale(mine, theirs, a)) is not None:
                difference += f"; the {subject}'s logit gaps are the {ref}'s times {scale:.4g}"
        elif set(mine) != set(theirs):
            difference = (f"step {step}: top-{TOP_LOGPROBS} tokens {ref} {sorted(mine)} vs "
                          f"{subject} {sorted(theirs)}")
    data["max_logprob_diff"] = max(deltas)
    return difference, data


def prompt_ids_difference(expected: Decoded, actual: Decoded, ref: str,
                          subject: str) -> str | None:
    """The prompts the two sides decoded from, compared apart from the decoding: a known
    prompt difference never stands for a decoding difference (that one has its own bound)."""
    if expected.prompt_ids == actual.prompt_ids:
        return None
    return (f"prompt ids differ ({ref} {len(expected.prompt_ids)} tokens, {subject} "
            f"{len(actual.prompt_ids)})")


def logit_scale(reference: dict[int, float], subject: dict[int, float], top: int,
                tolerance: float = 1e-3) -> float | None:
    """The factor the subject's logits are the reference's by, where one factor explains every
    shared top token (log-softmax keeps logit differences, so the gaps to the chosen token
    scale by it); None where no single factor does, or it is 1."""
    ratios = [(subject[t] - subject[top]) / (reference[t] - reference[top])
              for t in reference if t in subject and t != top
              and abs(reference[t] - reference[top]) > tolerance]
    if len(ratios) < 2:
        return None
    mean = sum(ratios) / len(ratios)
    if abs(mean - 1) <= tolerance or any(abs(r - mean) > tolerance * abs(mean) for r in ratios):
        return None
    return mean


def compare_decoded(native: Decoded, backend: Decoded, dtype: str, ref: str = "native",
                    subject: str = "backend") -> tuple[str | None, dict]:
    """The strict fp32 rule where the precision has one, else vLLM tests' lenient rule."""
    if dtype in LOGPROB_ATOL:
        return strict_difference(native, backend, LOGPROB_ATOL[dtype], ref, subject)
    return logprobs_difference(native, backend, ref, subject)


def reference_decode(ref: str, recipe: Recipe, path: str, device: str, dtype: str,
                     prompt: str, modality: str, items: list,
                     tokens: int = GENERATE_TOKENS) -> Decoded:
    """Greedy decoding by a reference: native vLLM's engine, or the HF model."""
    if ref == HF_REF:
        return hf_reference.decode(recipe, path, device, dtype, prompt, modality, items, tokens)
    return engine_decode(recipe, path, NATIVE, device, dtype, prompt, modality, items, tokens)


def compared_decodings(recipe: Recipe, path: str, device: str, dtype: str, prompt: str,
                       modality: str, subject_items: list, items: list, data: dict[str, Any],
                       references: Sequence[str] | None = None,
                       tokens: int = GENERATE_TOKENS,
                       first: Callable[[Decoded, Decoded, str, str], str | None] | None = None,
                       ) -> list[str]:
    """The backend's greedy decoding against every reference's (`compare_decoded`), each
    difference attributed; the backend failing is evidence, every reference failing ends
    the check. `first`, when given, words a difference it finds instead (the `model` check's
    greedy token)."""
    refs = references_of(recipe, references)
    outputs = run_references(refs, lambda ref: reference_decode(
        ref, recipe, path, device, dtype, prompt, modality, items, tokens), data)
    try:
        backend = engine_decode(recipe, path, BACKEND, device, dtype, prompt, modality,
                                subject_items, tokens)
    except Exception as error:
        data["backend"] = {"error": error_text(error)}
        data.update({f"{ref}_tokens": list(out.tokens) for ref, out in outputs.items()})
        return [f"backend: {error_text(error)}"]

    def compare(expected: Decoded, actual: Decoded, ref: str, subject: str) -> list[str]:
        difference, measured = compare_decoded(expected, actual, dtype, ref, subject)
        difference = (first and first(expected, actual, ref, subject)) or difference
        if (ref, subject) == (NATIVE_REF, "backend"):
            data.update(measured)  # the native comparison's measurements, where they were
        else:
            data[f"{subject} vs {ref}"] = measured
        found = [prompt_ids_difference(expected, actual, ref, subject), difference]
        return [text for text in found if text]

    problems = three_way("backend", outputs, backend, compare, data)
    if data.get("deviates", {}).get("backend") in ("hf", "all"):
        note = hf_ablation(recipe, path, device, dtype, prompt, modality, items, tokens,
                           backend, compare)
        problems = [p + note if p.startswith(HF_PREFIX) else p for p in problems]
    return problems


def hf_ablation(recipe: Recipe, path: str, device: str, dtype: str, prompt: str,
                modality: str, items: list, tokens: int, backend: Decoded,
                compare: Callable[[Decoded, Decoded, str, str], list[str]]) -> str:
    """Where the HF model differs from the vLLM implementations: the first processor output
    (`hf_reference.ABLATIONS`) without which it agrees with the backend, named ('' if none)."""
    present = hf_reference.processed_keys(path, prompt, modality, items)
    for key in (k for k in hf_reference.ABLATIONS if k in present):
        ablated = hf_reference.decode(recipe, path, device, dtype, prompt, modality, items,
                                      tokens, without=(key,))
        if not compare(ablated, backend, f"hf without {key}", "backend"):
            return f"; the HF model fed no {key} agrees with the backend"
    return ""


def engine_decode(recipe: Recipe, path: str, impl: str, device: str, dtype: str,
                  prompt: str, modality: str, items: list,
                  tokens: int = GENERATE_TOKENS) -> Decoded:
    """Greedy decoding on the process's engine for `impl` (one per implementation, shared by
    every model check of the checkpoint: building engines is most of their time)."""
    engine = llm(recipe, path, impl, device, dtype)
    ensure_distributed()  # a collected engine may have torn it down
    try:
        return decode(engine, prompt, modality, items, tokens, audio_rate(recipe, path))
    except Exception:
        # an in-process engine that failed mid-step is not trusted again
        model_key = cache_key("model", path, impl, device, dtype)
        if getattr(CACHE.entries.get(model_key), "engine", None) is engine:
            CACHE.drop(key=model_key)
        CACHE.drop(key=cache_key("llm", path, impl, device, dtype))
        raise


def check_generate(recipe: Recipe, path: str, *, device: str = "cpu", dtype: str = "float32",
                   subject_media: MediaHook | None = None,
                   references: Sequence[str] | None = None) -> tuple[str | None, dict]:
    """Greedy decoding with logprobs on the recipe's two-item prompt, the backend against
    native vLLM (where vLLM has a native model) and the HF model."""
    if recipe.pooling:
        raise NotApplicable(not_decoding(recipe))
    modality, prompt, items = two_item_inputs(recipe, path)
    subject_items = subject_media(list(items)) if subject_media else items
    data: dict[str, Any] = {}
    problems = compared_decodings(recipe, path, device, dtype, prompt, modality, subject_items,
                                  items, data, references)
    problems += text_only(recipe, path, device, dtype, modality, data, references)
    data[PROBLEMS] = problems
    return (problems[0] if problems else None), data


def not_decoding(recipe: Recipe) -> str:
    """Why a decoding check does not apply to a pooling checkpoint."""
    return (f"{recipe.name} is a pooling checkpoint ({recipe.architecture}, runner "
            f"{recipe.runner!r}): vLLM serves it no decoding; the `pooling` check compares "
            "its pooled outputs")


# A request without media: a multimodal model serves text too, and the steps that assume items
# (M-RoPE grids, the encoder's batch) must not break it
TEXT_ONLY_PROMPT = "A question that shows nothing at all"
TEXT_ONLY = "text only"


def text_only(recipe: Recipe, path: str, device: str, dtype: str, modality: str,
              data: dict[str, Any], references: Sequence[str] | None = None,
              tokens: int = GENERATE_TOKENS, **kwargs: Any) -> list[str]:
    """The text-only request's problems, prefixed, measurements in `data[TEXT_ONLY]`."""
    data[TEXT_ONLY] = {}
    found = compared_decodings(recipe, path, device, dtype, TEXT_ONLY_PROMPT, modality, [], [],
                               data[TEXT_ONLY], references, tokens, **kwargs)
    return [f"{HF_PREFIX}{TEXT_ONLY}: {p.removeprefix(HF_PREFIX)}" if p.startswith(HF_PREFIX)
            else f"{TEXT_ONLY}: {p}" for p in found]


CHECK = Check(
    id="generate",
    statement="Greedy decoding of the backend agrees with each reference's, on the recipe's "
              "prompt and on a text-only one: in fp32 every position's top logprobs within fp32 "
              "noise, else vLLM tests' check_logprobs_close.",
    hint="the backend decodes other tokens than native vLLM: look at the embedding positions "
         "and the M-RoPE positions first, then at the decoder's inputs",
    level="checkpoint", run=returning_outcome(check_generate), loads_model=True,
    compared_with=MODEL_REFERENCES,
    proof=Proof("backend-logits-negated", "llava", "step 0: native token"),
    matrix_fault="backend-logits-negated",
    more_proofs=(Proof("backend-logits-negated", "aya_vision", "vs hf: step 0: hf token",
                       subject=VLLM_BACKEND, sub_property=HF_REF),
                 # the fp32 bound: the same tokens, logprobs off by about 1e-3
                 Proof("backend-logits-scaled", "llava", "logprob of token",
                       subject=VLLM_BACKEND),),
)
