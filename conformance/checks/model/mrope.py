"""mrope: M-RoPE positions and decode delta of the backend model (and of impl on the HF model)
equal native vLLM's and those the HF model's forward computes, on prompts with several images
in varied places."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import impl.mrope
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
from conformance.checks.model.inputs import (
    error_text,
    item_limit,
    items_in_prompt_order,
    process,
    summary,
)
from conformance.checks.model.loading import (
    BACKEND,
    NATIVE,
    hf_model,
    native_config,
    vllm_model,
)
from conformance.checks.model.references import (
    HF_PREFIX,
    HF_REF,
    NATIVE_REF,
    REFERENCES,
    merged_relations,
    references_of,
    run_references,
    subjects_compared,
    three_way,
)
from conformance.core.subjects import VLLM_BACKEND
from conformance.core.vllms import current_label, impl_profile
from conformance.inputs.media import Media
from conformance.subjects.vllm import from_vllm_output
from fixtures.recipe import Recipe

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
        # a request without images: the model still places its tokens (no grid to stack)
        ("text only", "A question that shows no image at all", 0),
    ]


def mrope_images(count: int) -> list:
    return [m.materialise() for m in mrope_media(count)]


def mrope_media(count: int) -> tuple[Media, ...]:
    """`count` images of distinct M-RoPE grids (seeds 0, 1, ...)."""
    return tuple(Media("image", h, w, seed=i)
                 for i, (h, w) in enumerate(MROPE_IMAGE_SIZES[:count]))


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
    processed = from_vllm_output(out)
    return impl.mrope.mrope_input_positions(model, list(out["prompt_token_ids"]),
                                            impl.mrope.features_of(processed),
                                            profile=impl_profile(current_label()))


def compare_positions(expected: tuple[Any, int], actual: tuple[Any, int],
                      ref: str = "native") -> tuple[str | None, dict]:
    """The first difference of positions, then of the delta; `ref` names the reference."""
    (want, want_delta), (got, got_delta) = expected, actual
    if tuple(want.shape) != tuple(got.shape):
        return (f"positions shape {tuple(got.shape)} vs {ref} {tuple(want.shape)}",
                {"shape": list(got.shape), f"{ref}_shape": list(want.shape)})
    wrong = (want != got).any(dim=0).nonzero().flatten().tolist()
    row = {"mismatched_positions": len(wrong),
           "max_abs": int((want - got).abs().max()) if want.numel() else 0,
           "delta": int(got_delta), f"{ref}_delta": int(want_delta)}
    if wrong:
        at = wrong[0]
        return (f"{len(wrong)} position(s) differ, first at token {at}: "
                f"{got[:, at].tolist()} vs {ref} {want[:, at].tolist()}"), row
    if int(got_delta) != int(want_delta):
        return f"delta {got_delta} vs {ref} {want_delta}", row
    return None, row


def check_mrope(recipe: Recipe, path: str, *, device: str = "cpu", dtype: str = "float32",
                subject_media: MediaHook | None = None,
                references: Sequence[str] | None = None) -> tuple[str | None, dict]:
    """Positions and delta from the backend's `get_mrope_input_positions` (and impl's
    `get_rope_index` driver on the HF model, fed the backend's processed prompt) against every
    reference, prompt by prompt: native vLLM's model (where vLLM has one) and the positions
    the HF model's own forward hands its language model; each gets its own processor's
    output."""
    refs = references_of(recipe, references)
    if not uses_mrope(recipe, path):
        raise NotApplicable(f"{recipe.architecture} does not use M-RoPE")
    if "image" not in recipe.modalities:
        raise NotApplicable(f"{recipe.name} exercises no images")
    problems: list[str] = []
    data: dict[str, Any] = {"prompts": []}
    limit = item_limit(recipe, path, "image")
    for description, prompt, count in mrope_prompts(recipe):
        if limit is not None and count > limit:
            continue
        row: dict[str, Any] = {"prompt": description}
        problems += compare_prompt(recipe, path, refs, description, prompt, count, device,
                                   dtype, subject_media, row)
        data["prompts"].append(row)
    data[REFERENCES] = merged_relations(data["prompts"])
    data[PROBLEMS] = problems
    return summary(problems), data


def compare_prompt(recipe: Recipe, path: str, refs: Sequence[str], description: str,
                   prompt: str, count: int, device: str, dtype: str,
                   subject_media: MediaHook | None, row: dict[str, Any]) -> list[str]:
    """One prompt's problems for every subject, measurements in `row`."""
    images = mrope_images(count)
    subject_images = subject_media(list(images)) if subject_media else images
    expected = run_references(refs, lambda ref: reference_mrope(
        ref, recipe, path, images, prompt, device, dtype), row)
    row["tokens"] = {ref: int(positions.shape[-1]) for ref, (positions, _) in expected.items()}

    def differences(want: tuple[Any, int], have: tuple[Any, int], ref: str,
                    name: str) -> list[str]:
        difference, row[name if ref == NATIVE_REF else f"{name} vs {ref}"] = \
            compare_positions(want, have, ref)
        return [difference] if difference else []

    problems: list[str] = []
    for subject in subjects_compared():
        try:
            got = subject_mrope(subject, recipe, path, subject_images, prompt, device, dtype)
        except Exception as error:  # one subject's failure is evidence
            row[subject] = {"error": error_text(error)}
            problems.append(f"{subject} on {description!r}: {error_text(error)}")
            continue
        for found in three_way(subject, expected, got, differences, row):
            text = f"{subject} on {description!r}: {found.removeprefix(HF_PREFIX)}"
            problems.append(HF_PREFIX + text if found.startswith(HF_PREFIX) else text)
    if problems:  # which prompt a reproducer replays
        row["problems"] = len(problems)
    return problems


def uses_mrope(recipe: Recipe, path: str) -> bool:
    """Whether the model places tokens by M-RoPE: native vLLM's config says so where vLLM has
    a model of its own; else vLLM's own test on the checkpoint's HF config (what the backend's
    config would say, without loading its processor)."""
    if recipe.native_in_vllm:
        return bool(native_config(recipe, path).uses_mrope)
    from transformers import AutoConfig
    from vllm.transformers_utils.config import uses_mrope as config_uses_mrope

    return config_uses_mrope(AutoConfig.from_pretrained(path))


def reference_mrope(ref: str, recipe: Recipe, path: str, images: list, prompt: str,
                    device: str, dtype: str) -> tuple[Any, int]:
    if ref == HF_REF:
        return hf_reference.mrope_positions(recipe, path, device, dtype, prompt, images)
    native = vllm_model(recipe, path, NATIVE, device, dtype)
    out = process(native, prompt, "image", images)
    return native.model.get_mrope_input_positions(list(out["prompt_token_ids"]),
                                                   feature_specs(out))


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
              "driver) equal each reference's, on prompts with several images and none.",
    hint="M-RoPE positions differ from native vLLM's: compare the backend's "
         "get_mrope_input_positions inputs (grid sizes per item, item order) with native's",
    level="checkpoint", run=returning_outcome(check_mrope), loads_model=True,
    compared_with=MODEL_REFERENCES,
    proof=Proof("swapped-items", "qwen2_5_vl", "position(s) differ"),
    matrix_fault="backend-mrope-shifted",
    more_proofs=(Proof("backend-text-only-stack", "qwen2_5_vl",
                       "backend on 'text only': RuntimeError: stack expects",
                       subject=VLLM_BACKEND),
                 Proof("backend-mrope-shifted", "qwen2_5_vl",
                       "position(s) differ, first at token 0", subject=VLLM_BACKEND)),
)
