"""encoder: per-item multimodal embeddings of the backend model (and of impl on the HF model)
equal the native model's `embed_multimodal` and the rows the HF model itself merges for each
item, compared item by item after splitting."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from conformance.checks.contract import (
    MODEL_REFERENCES,
    PROBLEMS,
    Check,
    MediaHook,
    Proof,
    returning_outcome,
)
from conformance.checks.model import hf_reference
from conformance.checks.model.inputs import (
    error_text,
    impl_embed,
    nested_inputs,
    process,
    summary,
    two_item_inputs,
    vllm_embed,
)
from conformance.checks.model.loading import BACKEND, NATIVE, hf_model, vllm_model
from conformance.checks.model.references import (
    HF_PREFIX,
    HF_REF,
    NATIVE_REF,
    references_of,
    run_references,
    subjects_compared,
    three_way,
)
from conformance.checks.model.tolerances import compare_items, tolerance_for
from conformance.core.subjects import VLLM_BACKEND
from conformance.inputs.media import audio_rate
from fixtures.recipe import Recipe

NESTED = "nested items"  # the label of the second batch's problems and data


def check_encoder(recipe: Recipe, path: str, *, device: str = "cpu", dtype: str = "float32",
                  subject_media: MediaHook | None = None,
                  references: Sequence[str] | None = None) -> tuple[str | None, dict]:
    """Per-item embeddings of the backend model and of impl on the HF model against every
    reference: native vLLM's `embed_multimodal` (where vLLM has a native model) and the rows
    the HF model merges for each item processed alone (`hf_reference.item_embeddings`).

    Each vLLM model gets its own processor's output for the recipe's two-item prompt (as when
    serving); impl is fed the backend's processed items. Items are compared by index within
    their modality, so prompt-id differences (gemma3's newlines) do not enter. A subject that
    raises is reported as evidence; every reference raising ends the check. Then the same
    for two nested items (`nested_inputs`): a per-item size mix-up that makes the tower raise
    on the recipe's items shows there as embeddings that differ, so a comparison."""
    tolerance = tolerance_for(dtype)
    refs = references_of(recipe, references)
    data: dict[str, Any] = {"tolerance": tolerance.describe()}
    problems = compare(recipe, path, two_item_inputs(recipe, path), device, dtype,
                       subject_media, data, "", refs)
    nested = nested_inputs(recipe, path)
    if nested is not None:
        data[NESTED] = {}
        found = compare(recipe, path, nested, device, dtype, subject_media, data[NESTED],
                        f" on '{NESTED}':", refs)
        if found:  # what a reproducer replays: the nested items
            data[NESTED]["problems"] = len(found)
        problems += found
    data[PROBLEMS] = problems
    return summary(problems), data


def reference_embeddings(ref: str, recipe: Recipe, path: str, inputs: tuple[str, str, list],
                         device: str, dtype: str) -> dict[str, list]:
    modality, prompt, items = inputs
    if ref == HF_REF:
        return {modality: hf_reference.item_embeddings(recipe, path, device, dtype, modality,
                                                       items)}
    native = vllm_model(recipe, path, NATIVE, device, dtype)
    return vllm_embed(native, process(native, prompt, modality, items,
                                      audio_rate(recipe, path)), device)


def compare(recipe: Recipe, path: str, inputs: tuple[str, str, list], device: str, dtype: str,
            subject_media: MediaHook | None, data: dict[str, Any], where: str,
            refs: Sequence[str]) -> list[str]:
    """Problems of the backend and impl on one prompt (`where` names it), measurements in
    `data`."""
    tolerance = tolerance_for(dtype)
    modality, prompt, items = inputs
    subject_items = subject_media(list(items)) if subject_media else items
    expected = run_references(refs, lambda ref: reference_embeddings(
        ref, recipe, path, inputs, device, dtype), data)
    for ref, embeddings in expected.items():
        data[ref] = {m: [list(e.shape) for e in es] for m, es in embeddings.items()}

    def backend_out() -> Any:
        return process(vllm_model(recipe, path, BACKEND, device, dtype), prompt, modality,
                       subject_items, audio_rate(recipe, path))

    runs: dict[str, Callable[[], dict[str, list]]] = {
        "backend": lambda: vllm_embed(vllm_model(recipe, path, BACKEND, device, dtype),
                                      backend_out(), device),
        "impl": lambda: impl_embed(hf_model(path, device, dtype), backend_out(), device),
    }
    runs = {subject: run for subject, run in runs.items() if subject in subjects_compared()}
    problems: list[str] = []
    for subject, run in runs.items():
        try:
            actual = run()
        except Exception as error:  # one subject's failure is evidence, not the check's end
            data[subject] = {"error": error_text(error)}
            problems.append(f"{subject}{where or ':'} {error_text(error)}")
            continue
        data[subject] = {}

        def differences(want: dict[str, list], got: dict[str, list], ref: str,
                        name: str) -> list[str]:
            found: list[str] = []
            for mod in sorted(set(want) | set(got)):
                items_found, rows = compare_items(mod, want.get(mod, []), got.get(mod, []),
                                                  tolerance, ref)
                data[name if ref == NATIVE_REF else f"{name} vs {ref}"][mod] = rows
                found.extend(items_found)
            return found

        data.setdefault("native vs hf", {})
        data.setdefault(f"{subject} vs hf", {})
        found = three_way(subject, expected, actual, differences, data)
        problems.extend(f"{subject}{where} {p}" if not p.startswith(HF_PREFIX)
                        else f"{HF_PREFIX}{subject}{where} {p.removeprefix(HF_PREFIX)}"
                        for p in found)
    return problems


CHECK = Check(
    id="encoder",
    statement="Per item, the backend's multimodal embeddings (and impl's on the HF model) equal "
              "each reference's within the precision's tolerance.",
    hint="the backend's image/audio features differ from native vLLM's: compare "
         "get_image_features / get_audio_features with the native encoder, and how the output "
         "is split per item",
    level="checkpoint", run=returning_outcome(check_encoder), loads_model=True,
    compared_with=MODEL_REFERENCES,
    proof=Proof("swapped-items", "qwen2_5_vl", "image item 0: max abs"),
    matrix_fault="backend-row-shifted",
    more_proofs=(Proof("swapped-items", "aya_vision", "vs hf: backend image item 0: shape",
                       subject=VLLM_BACKEND, sub_property=HF_REF),
                 # one item's rows each one position late: the right rows, misplaced
                 Proof("backend-row-shifted", "llava", "backend image item 0: max abs",
                       subject=VLLM_BACKEND),
                 # a config field's class default read instead of the checkpoint's value: the
                 # config variant setting it (vision_feature_layer -1) encodes other features
                 Proof("backend-config-default", "llava~last_layer",
                       "backend image item 0: max abs", subject=VLLM_BACKEND),),
)
