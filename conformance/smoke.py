"""The oracle smoke checks, run in-process on the installed transformers version.

- `processing`: native and backend processors expand a two-item prompt into the same token ids
  and the same placeholder ranges (offset, length, embedding positions).
- `model`: both implementations load the checkpoint and pick the same greedy next token.
"""

from __future__ import annotations

import re
import time
import traceback
from collections.abc import Callable

from conformance import oracle
from conformance.cases import SAMPLING_RATE, Case, Media
from conformance.expectations import known_reason
from conformance.media import AUDIO_SECONDS, IMAGE_SIZES, make_items
from conformance.verdict import Verdict
from fixtures.recipe import Recipe

SMOKE_CHECKS = ("processing", "model")
ITEMS_PER_PROMPT = 2


def _inputs(recipe: Recipe) -> tuple[str, str, dict, dict[str, int]]:
    modality = recipe.modalities[0]
    prompt = recipe.render_prompt(modality, ITEMS_PER_PROMPT)
    mm_data = oracle.as_mm_data(modality, make_items(modality, ITEMS_PER_PROMPT))
    return modality, prompt, mm_data, {modality: ITEMS_PER_PROMPT}


def smoke_case(recipe: Recipe) -> Case:
    """The recipe's two-item prompt as a case (for the subjects' adapters)."""
    modality = recipe.modalities[0]
    segments = tuple(re.split(r"\{\d\}", recipe.prompt))
    segments += ("",) * (ITEMS_PER_PROMPT + 1 - len(segments))
    if modality == "image":
        media = tuple(Media("image", height=h, width=w, seed=i)
                      for i, (h, w) in enumerate(IMAGE_SIZES[:ITEMS_PER_PROMPT]))
    else:
        media = tuple(Media("audio", samples=int(seconds * SAMPLING_RATE), seed=i)
                      for i, seconds in enumerate(AUDIO_SECONDS[:ITEMS_PER_PROMPT]))
    return Case(recipe.name, modality, segments, media)


def check_processing_against_hf(recipe: Recipe, path: str) -> tuple[str | None, dict]:
    """Without a native vLLM model the HF processor's own expansion is the oracle."""
    from conformance.checks.base import ids_difference, placeholders_difference
    from conformance.subjects import make_subject

    case = smoke_case(recipe)
    expected = make_subject("hf", path, recipe).process(case)
    actual = make_subject("vllm-backend", path, recipe).process(case)
    difference = ids_difference(expected.prompt_ids, actual.prompt_ids)
    difference = difference or placeholders_difference(expected, actual)
    data = {"oracle": "hf", "prompt_len": len(expected.prompt_ids)}
    return (f"vs hf: {difference}" if difference else None), data


def check_processing(recipe: Recipe, path: str) -> tuple[str | None, dict]:
    """Returns (first difference or None, data)."""
    if not recipe.native_in_vllm:
        return check_processing_against_hf(recipe, path)
    _, prompt, mm_data, limits = _inputs(recipe)
    results = {
        impl: oracle.process(oracle.create_processor(path, impl, limits), prompt, mm_data)
        for impl in oracle.IMPLS
    }
    native, backend = results["vllm"], results["transformers"]
    data = {
        "prompt_len": len(native.prompt_ids),
        "native": {m: [p.describe() for p in ps] for m, ps in native.placeholders.items()},
        "backend": {m: [p.describe() for p in ps] for m, ps in backend.placeholders.items()},
    }
    return oracle.first_difference(native, backend), data


def check_model(recipe: Recipe, path: str) -> tuple[str | None, dict]:
    _, prompt, mm_data, limits = _inputs(recipe)
    picks = {impl: oracle.greedy_step(path, impl, prompt, mm_data, limits) for impl in oracle.IMPLS}
    (native_token, native_top), (backend_token, backend_top) = picks["vllm"], picks["transformers"]
    data = {"native_token": native_token, "backend_token": backend_token}
    if native_token == backend_token:
        return None, data
    return (
        f"greedy token differs: native {native_token} (top-5 {sorted(native_top)}) vs backend "
        f"{backend_token} (top-5 {sorted(backend_top)})",
        data,
    )


CHECKS: dict[str, Callable[[Recipe, str], tuple[str | None, dict]]] = {
    "processing": check_processing,
    "model": check_model,
}


def run_cell(recipe: Recipe, check: str, version: str, build: Callable[[str], str]) -> Verdict:
    started = time.monotonic()
    if not recipe.supports(version):
        return Verdict(recipe.name, version, check, "n/a",
                       f"{recipe.architecture} not in transformers {version}"
                       + (f": {recipe.version_reason}" if recipe.version_reason else ""))
    if check == "model" and not recipe.native_in_vllm:
        return Verdict(recipe.name, version, check, "n/a",
                       f"vLLM 0.31.0 has no native {recipe.architecture} to compare the greedy "
                       "step with")
    try:
        path = build(recipe.name)
        difference, data = CHECKS[check](recipe, path)
    except Exception as error:  # a cell's error is its verdict, never the run's end
        tail = "".join(traceback.format_exception_only(type(error), error)).strip()
        known = known_reason(recipe.name, check, version, observed=tail)
        status = "xfail" if known else "error"
        detail = f"{known.reason} [observed: {tail}]" if status == "xfail" else tail
        return Verdict(recipe.name, version, check, status, detail, time.monotonic() - started)
    return judge(recipe.name, check, version, difference, data, time.monotonic() - started)


def judge(fixture: str, check: str, version: str, difference: str | None, data: dict,
          seconds: float) -> Verdict:
    """pass / fail, or xfail / xpass where the cell is a known disagreement."""
    known = known_reason(fixture, check, version, observed=difference)
    if difference is None:
        if known:
            return Verdict(fixture, version, check, "xpass",
                           f"listed as known but passed: {known.reason}", seconds, data)
        return Verdict(fixture, version, check, "pass", "", seconds, data)
    if known:
        return Verdict(fixture, version, check, "xfail",
                       f"{known.reason} [observed: {difference}]", seconds, data)
    return Verdict(fixture, version, check, "fail", difference, seconds, data)
