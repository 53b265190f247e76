"""The oracle smoke checks, run in-process on the installed transformers version.

- `processing`: native and backend processors expand a two-item prompt into the same token ids
  and the same placeholder ranges (offset, length, embedding positions).
- `model`: both implementations load the checkpoint and pick the same greedy next token.
"""

from __future__ import annotations

import functools
import os
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
# Model-level parity (conformance/modelchecks.py), run like the smoke checks: vLLM's backend
# (and impl on the HF model) against native vLLM on the recipe's own prompt
MODEL_CHECKS = ("encoder", "mrope", "generate")
NATIVE_ONLY = ("model", *MODEL_CHECKS)
ITEMS_PER_PROMPT = 2


def items_per_prompt(recipe: Recipe) -> int:
    return min(ITEMS_PER_PROMPT, recipe.max_items)


def _inputs(recipe: Recipe) -> tuple[str, str, dict, dict[str, int]]:
    modality, count = recipe.modalities[0], items_per_prompt(recipe)
    prompt = recipe.render_prompt(modality, count)
    mm_data = oracle.as_mm_data(modality, make_items(modality, count))
    return modality, prompt, mm_data, {modality: count}


def smoke_case(recipe: Recipe) -> Case:
    """The recipe's two-item prompt as a case (for the subjects' adapters)."""
    modality, count = recipe.modalities[0], items_per_prompt(recipe)
    placeholder = recipe.placeholder[modality]
    if placeholder:
        segments = tuple(re.split(r"\{\d\}", recipe.render_prompt(modality, count).replace(
            placeholder, "{0}")))
    else:  # the model places its items itself (PaliGemma): the prompt is plain text
        segments = (recipe.render_prompt(modality, count), *[""] * count)
    if modality == "image":
        media = tuple(Media("image", height=h, width=w, seed=i)
                      for i, (h, w) in enumerate(IMAGE_SIZES[:count]))
    else:
        media = tuple(Media("audio", samples=int(seconds * SAMPLING_RATE), seed=i)
                      for i, seconds in enumerate(AUDIO_SECONDS[:count]))
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
        "native": {m: [oracle.describe(p) for p in ps] for m, ps in native.placeholders.items()},
        "backend": {m: [oracle.describe(p) for p in ps] for m, ps in backend.placeholders.items()},
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


def model_options() -> dict[str, str]:
    """Where and in what precision the model checks run: `conformance run --device/--dtype`."""
    return {"device": os.environ.get("CONFORMANCE_DEVICE", "cpu"),
            "dtype": os.environ.get("CONFORMANCE_DTYPE", "float32")}


class _Never(Exception):
    """Matches nothing: the default for a check that is always applicable."""


def run_cell(recipe: Recipe, check: str, version: str, build: Callable[[str], str]) -> Verdict:
    started = time.monotonic()
    if not recipe.supports(version):
        return Verdict(recipe.name, version, check, "n/a",
                       f"{recipe.architecture} not in transformers {version}"
                       + (f": {recipe.version_reason}" if recipe.version_reason else ""))
    if check in NATIVE_ONLY and not recipe.native_in_vllm:
        return Verdict(recipe.name, version, check, "n/a",
                       f"vLLM 0.31.0 has no native {recipe.architecture} model to compare with")
    not_applicable: type[Exception] = _Never
    try:
        if check in MODEL_CHECKS:
            from conformance.modelchecks import MODEL_CHECK_FUNCTIONS, NotApplicable

            not_applicable = NotApplicable
            function = functools.partial(MODEL_CHECK_FUNCTIONS[check], **model_options())
        else:
            function = CHECKS[check]
        path = build(recipe.name)
        difference, data = function(recipe, path)
    except not_applicable as error:
        return Verdict(recipe.name, version, check, "n/a", str(error),
                       time.monotonic() - started)
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
