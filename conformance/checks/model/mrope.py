"""mrope: M-RoPE positions and decode delta of the backend model (and of impl on the HF model)
equal the native model's, on prompts with several images in varied places."""

from __future__ import annotations

from typing import Any

from conformance.checks.contract import (
    PROBLEMS,
    Check,
    MediaHook,
    NotApplicable,
    Proof,
    returning_outcome,
)
from conformance.checks.model.inputs import error_text, items_in_prompt_order, process, summary
from conformance.checks.model.loading import (
    BACKEND,
    NATIVE,
    hf_model,
    native_config,
    native_limit,
    require_native,
    vllm_model,
)
from fixtures.recipe import Recipe

SUBJECTS = ("backend", "impl")  # compared against native vLLM

MROPE_IMAGE_SIZES = ((28, 84), (84, 28), (56, 56), (28, 56))  # (h, w): distinct grids


def mrope_prompts(recipe: Recipe) -> list[tuple[str, str, int]]:
    """(description, prompt, images): several images, text between, images at start and end."""
    ph = recipe.placeholder["image"]
    return [
        ("recipe prompt, 2 images", recipe.render_prompt("image", 2), 2),
        ("images at start, middle and end", f"{ph} left of {ph} and right{ph}", 3),
        ("two adjacent images at the start", f"{ph}{ph} then text", 2),
        ("text then one image at the end", f"A question about {ph}", 1),
        ("four images between text", f"a {ph} b {ph} c {ph} d {ph} e", 4),
    ]


def mrope_images(count: int) -> list:
    from conformance.inputs.cases import Media

    return [Media("image", h, w, seed=i).materialise()
            for i, (h, w) in enumerate(MROPE_IMAGE_SIZES[:count])]


def feature_specs(out: Any) -> list[Any]:
    """The request's `mm_features`, built as vLLM's input processor builds them."""
    from vllm.multimodal.inputs import MultiModalFeatureSpec

    hashes = out.get("mm_hashes") or {}
    specs = []
    for modality, index, item in items_in_prompt_order(out):
        identifier = hashes.get(modality, [f"{modality}-{index}"] * (index + 1))[index]
        specs.append(MultiModalFeatureSpec(data=item, modality=modality, identifier=identifier,
                                           mm_position=out["mm_placeholders"][modality][index],
                                           mm_hash=identifier))
    return specs


def impl_mrope(model: Any, out: Any) -> tuple[Any, int]:
    import impl.mrope
    from conformance.subjects.vllm import from_vllm_output

    processed = from_vllm_output(out)
    return impl.mrope.mrope_input_positions(model, list(out["prompt_token_ids"]),
                                            impl.mrope.features_of(processed))


def compare_positions(expected: tuple[Any, int], actual: tuple[Any, int]) -> tuple[str | None,
                                                                                    dict]:
    (want, want_delta), (got, got_delta) = expected, actual
    if tuple(want.shape) != tuple(got.shape):
        return (f"positions shape {tuple(got.shape)} vs native {tuple(want.shape)}",
                {"shape": list(got.shape), "native_shape": list(want.shape)})
    wrong = (want != got).any(dim=0).nonzero().flatten().tolist()
    row = {"mismatched_positions": len(wrong),
           "max_abs": int((want - got).abs().max()) if want.numel() else 0,
           "delta": int(got_delta), "native_delta": int(want_delta)}
    if wrong:
        at = wrong[0]
        return (f"{len(wrong)} position(s) differ, first at token {at}: "
                f"{got[:, at].tolist()} vs native {want[:, at].tolist()}"), row
    if int(got_delta) != int(want_delta):
        return f"delta {got_delta} vs native {want_delta}", row
    return None, row


def check_mrope(recipe: Recipe, path: str, *, device: str = "cpu", dtype: str = "float32",
                subject_media: MediaHook | None = None) -> tuple[str | None, dict]:
    """Positions and delta from the backend's `get_mrope_input_positions` (and impl's
    `get_rope_index` driver on the HF model, fed the backend's processed prompt) equal the
    native model's, prompt by prompt; each model gets its own processor's output."""
    require_native(recipe)
    if not native_config(recipe, path).uses_mrope:
        raise NotApplicable(f"{recipe.architecture} does not use M-RoPE")
    if "image" not in recipe.modalities:
        raise NotApplicable(f"{recipe.name} exercises no images")
    native = vllm_model(recipe, path, NATIVE, device, dtype)
    problems: list[str] = []
    data: dict[str, Any] = {"prompts": []}
    limit = native_limit(recipe, path, "image")
    for description, prompt, count in mrope_prompts(recipe):
        if limit is not None and count > limit:
            continue
        images = mrope_images(count)
        subject_images = subject_media(list(images)) if subject_media else images
        native_out = process(native, prompt, "image", images)
        expected = native.model.get_mrope_input_positions(
            list(native_out["prompt_token_ids"]), feature_specs(native_out))
        row: dict[str, Any] = {"prompt": description,
                               "tokens": len(native_out["prompt_token_ids"])}
        for subject in SUBJECTS:
            try:
                got = subject_mrope(subject, recipe, path, subject_images, prompt, device, dtype)
                difference, row[subject] = compare_positions(expected, got)
            except Exception as error:  # one subject's failure is evidence
                difference, row[subject] = error_text(error), {"error": error_text(error)}
            if difference:
                problems.append(f"{subject} on {description!r}: {difference}")
        data["prompts"].append(row)
    data[PROBLEMS] = problems
    return summary(problems), data


def subject_mrope(subject: str, recipe: Recipe, path: str, images: list, prompt: str,
                  device: str, dtype: str) -> tuple[Any, int]:
    backend = vllm_model(recipe, path, BACKEND, device, dtype)
    out = process(backend, prompt, "image", images)
    if subject == "impl":
        return impl_mrope(hf_model(path, device, dtype), out)
    return backend.model.get_mrope_input_positions(list(out["prompt_token_ids"]),
                                                   feature_specs(out))


CHECK = Check(
    id="mrope",
    statement="M-RoPE positions and decode delta of the backend (and of impl's get_rope_index "
              "driver) equal native vLLM's.",
    hint="M-RoPE positions differ from native vLLM's: compare the backend's "
         "get_mrope_input_positions inputs (grid sizes per item, item order) with native's",
    level="checkpoint", run=returning_outcome(check_mrope), needs_native=True, loads_model=True,
    proof=Proof("swapped-items", "qwen2_5_vl", "position(s) differ"),
)
