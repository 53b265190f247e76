"""slicing: each item's slice of every processor output field holds exactly that item's rows.

Sub-properties, each judged on its own: an item's fields are the same in the batch as
processed alone by the subject (nothing of its neighbours), and processed alone they are the
HF processor's outputs for that item alone plus the per-item count the backend derives, no
more (a helper field the backend should have popped reaches the model as a keyword argument).
Where the backend cuts image data into items by a row count it derives itself (the Offsets
path), the rows per image and the dimension it cuts along are also compared with impl's, step
against step: a wrong count otherwise shows only as the backend's own "cannot be split" error
on every request, which says that the rows do not add up, not which count is wrong.
"""

from __future__ import annotations

from typing import Any

from conformance.checks.contract import Check, Outcome, Proof
from conformance.checks.differences import served_form, value_difference
from conformance.inputs.cases import Case
from conformance.subjects.context import Context, OracleFailed
from conformance.subjects.hf import image_outputs
from conformance.subjects.impl import reference_row_layout
from impl.fields import image_data

ALONE = "alone vs batch"
HF = "alone vs the HF processor"
ROWS = "rows per image vs impl"
# The per-item counts the backend writes itself (its `_MODALITY_SIZE_KEYS`; video from vLLM
# 0.32.0, whose backend takes it), no HF output
COUNT_FIELDS = {"image": "num_image_patches", "audio": "num_audio_tokens",
                "video": "num_video_patches"}


def derives_rows(ctx: Context) -> bool:
    return "image" in ctx.recipe.modalities and "hf" in ctx.oracles and getattr(
        ctx.subject, "attributes_image_rows", lambda: False)()


def claims(ctx: Context) -> tuple[str, ...]:
    return (ALONE, HF, *((ROWS,) if derives_rows(ctx) else ()))


def rows_difference(ctx: Context, case: Case, processor: Any, outputs: dict) -> str | None:
    """The subject's rows per image and slice dimension against impl's, on the HF
    processor's outputs for the case's images; None when they agree."""
    want = reference_row_layout(processor, outputs, case)
    got = ctx.subject.image_row_layout(case, outputs)
    if got == want:
        return None
    return (f"image rows per item: {ctx.subject.name} {got[0]} along dim {got[1]}, impl "
            f"{want[0]} along dim {want[1]} (image data {shape_of(image_data(outputs))})")


def shape_of(data: object) -> str:
    return str(list(data.shape)) if hasattr(data, "shape") else type(data).__name__


def hf_difference(hf: dict, served: dict, modality: str, where: str) -> str | None:
    wanted = set(hf) | {COUNT_FIELDS[modality]}
    if set(served) != wanted:
        return (f"{where}: fields {sorted(served)}, the HF processor's and the count are "
                f"{sorted(wanted)} (extra {sorted(set(served) - wanted)})")
    for key in sorted(hf):
        if difference := value_difference(served_form(hf[key], served[key]), served[key],
                                          f"{where}.{key}"):
            return difference
    return None


def run(ctx: Context, case: Case) -> Outcome:
    rows, compared = None, False
    if case.modality == "image" and derives_rows(ctx):
        processor = ctx.oracles["hf"].processor_for(case.processor_kwargs)
        try:
            outputs = image_outputs(processor, case)
        except ValueError:  # the HF processor rejects the images: nothing to compare with
            outputs = None
        if outputs is not None:
            rows, compared = rows_difference(ctx, case, processor, outputs), True
    try:
        outcome = compare_slices(ctx, case)
    except Exception:
        if rows is None:
            raise
        # the backend cannot cut rows it counted wrongly: the count is what differs
        return Outcome(False, rows, exercised=frozenset({ROWS}))
    differences = [*([rows] if rows else []), *outcome.differences]
    return Outcome.judged(differences, set(outcome.exercised) | ({ROWS} if compared else set()))


def compare_slices(ctx: Context, case: Case) -> Outcome:
    modality, differences, exercised = case.modality, [], {ALONE}
    batch = ctx.subject_output(case).item_fields.get(modality, [])
    if len(batch) != len(case.media):
        return Outcome(False, f"{len(batch)} {modality} field slices for "
                              f"{len(case.media)} items", exercised=frozenset(exercised))
    for index in range(len(case.media)):
        alone = ctx.subject_output(case.single(index)).item_fields.get(modality, [{}])[0]
        if difference := value_difference(alone, batch[index],
                                          f"{modality} item {index} (alone vs batch)"):
            differences.append(difference)
            break
    for index in range(len(case.media) if "hf" in ctx.oracles else 0):
        try:
            hf = ctx.oracle_output("hf", case.single(index)).item_fields[modality][0]
        except OracleFailed:  # the HF processor rejects the item: nothing to compare with
            continue
        exercised.add(HF)
        alone = ctx.subject_output(case.single(index)).item_fields.get(modality, [{}])[0]
        if difference := hf_difference(hf, alone, modality,
                                       f"{modality} item {index} (alone vs the HF processor)"):
            differences.append(difference)
            break
    return Outcome.judged(differences, exercised)


CHECK = Check(
    id="slicing",
    statement="Each item's field slices equal the fields of that item processed alone, and "
              "those are the HF processor's for it plus the backend's per-item count; where "
              "the backend counts an image's rows itself, that count and the dimension it cuts "
              "along are impl's.",
    hint="a field cannot be cut per item: declare it in the sub-processor's model_input_names "
         "and keep one row layout (a leading batch dimension is dim 1); or a helper field "
         "the backend writes (`*_replacement_ids`) is not popped; or the backend's "
         "`_get_num_image_patches` / `_get_slice_dim` read the wrong count or dimension",
    level="case", run=run, claims=claims,
    proof=Proof("wrong-slice-dim", "idefics3", "alone vs batch"),
    more_proofs=(Proof("backend-rows-per-token", "qwen2_vl", "image rows per item: vllm-backend",
                       subject="vllm-backend", sub_property=ROWS),),
)
