"""slicing: each item's slice of every processor output field holds exactly that item's rows.

Sub-properties, each judged on its own: an item's fields are the same in the batch as
processed alone by the subject (nothing of its neighbours), and processed alone they are the
HF processor's outputs for that item alone plus the per-item count the backend derives, no
more (a helper field the backend should have popped reaches the model as a keyword argument).
Where the backend cuts image data into items by a row count it derives itself (the Offsets
path), the rows per image and the dimension it cuts along are also compared with impl's, step
against step: a wrong count otherwise shows only as the backend's own "cannot be split" error
on every request, which says that the rows do not add up, not which count is wrong.
Where the subject takes two modalities or more, the case's items are also processed with one
item of each other modality before them in the same prompt: each modality's placeholders and
field slices must be those it has without the others (the backend attributes every processor
output to the modality that produced it, and a single-modality prompt cannot show a mistake),
and its placeholders in the mixed prompt native vLLM's.
"""

from __future__ import annotations

from typing import Any

from conformance.checks.contract import Check, Outcome, Proof
from conformance.checks.differences import (
    error_text,
    prompt_difference,
    served_form,
    value_difference,
)
from conformance.core.subjects import HF as HF_ORACLE
from conformance.core.subjects import VLLM_BACKEND, VLLM_NATIVE
from conformance.inputs.cases import Case
from conformance.inputs.strategies import companion
from conformance.subjects.context import Context, OracleFailed
from conformance.subjects.hf import image_outputs
from conformance.subjects.impl import reference_row_layout
from conformance.subjects.protocol import IMAGE_ROWS
from impl.fields import image_data

ALONE = "alone vs batch"
HF = "alone vs the HF processor"
ROWS = "rows per image vs impl"
MIXED = "mixed modalities"
# The per-item counts the backend writes itself (its `_MODALITY_SIZE_KEYS`; video from vLLM
# 0.32.0, whose backend takes it), no HF output
COUNT_FIELDS = {"image": "num_image_patches", "audio": "num_audio_tokens",
                "video": "num_video_patches"}


def derives_rows(ctx: Context) -> bool:
    return ("image" in ctx.recipe.modalities and HF_ORACLE in ctx.oracles
            and IMAGE_ROWS in ctx.subject.capabilities and ctx.subject.attributes_image_rows())


def subject_modalities(ctx: Context) -> tuple[str, ...]:
    """What the subject takes: the recipe's modalities, and video where the subject takes it
    (vLLM's backend says; impl where its release profile serves it)."""
    return tuple(ctx.recipe.modalities) + (("video",) if ctx.video else ())


def claims(ctx: Context) -> tuple[str, ...]:
    return (ALONE, HF, *((ROWS,) if derives_rows(ctx) else ()),
            *((MIXED,) if len(subject_modalities(ctx)) > 1 else ()))


def mixed_difference(ctx: Context, case: Case) -> str | None:
    """One item of each other modality the subject takes placed before the case's items:
    each modality's placeholders (length, embedding positions) and field slices against
    those of its items in a prompt of their own; None when they agree."""
    seed = case.media[0].seed if case.media else 0
    mixed = case.with_companions(tuple(companion(m, seed) for m in subject_modalities(ctx)
                                       if m != case.modality))
    where = f"mixed {'+'.join(mixed.modalities)} prompt"
    try:
        got = ctx.subject_output(mixed)
    except Exception as error:  # each modality alone was processed
        return f"{where}: {error_text(error)}"
    for modality in mixed.modalities:
        try:
            want = ctx.subject_output(case if modality == case.modality
                                      else mixed.of_modality(modality))
        except Exception as error:
            return f"{where}: its {modality} item alone: {error_text(error)}"
        shapes = [[(p.length, tuple(e - p.offset for e in p.embed_positions)) for p in out]
                  for out in (want.placeholders.get(modality, ()),
                              got.placeholders.get(modality, ()))]
        if shapes[0] != shapes[1]:
            brief = short(shapes[1]) != short(shapes[0])
            got_text, want_text = (short(x) if brief else str(x) for x in shapes[::-1])
            return (f"{where}: {modality} placeholders (length, embeddings) {got_text}, "
                    f"{modality} alone {want_text}")
        if difference := value_difference(want.item_fields.get(modality, []),
                                          got.item_fields.get(modality, []),
                                          f"{where}: {modality} items (alone vs mixed)"):
            return difference
    return native_difference(ctx, mixed, got, where)


def native_difference(ctx: Context, mixed: Case, got: Any, where: str) -> str | None:
    """Where native vLLM processes the mixed prompt too, its ids and each modality's
    placeholders in it are native's."""
    if VLLM_NATIVE not in ctx.oracles:
        return None
    try:
        native = ctx.oracle_output(VLLM_NATIVE, mixed)
    except OracleFailed:  # native rejects the prompt: nothing to compare with
        return None
    difference = prompt_difference(native, got, (VLLM_NATIVE, ctx.subject.name))
    return f"{where}: vs vllm-native: {difference}" if difference else None


def short(shapes: list) -> str:
    """Placeholders as (length, embedding count), or whole where that hides the difference."""
    return str([(n, f"{len(e)} embeds") for n, e in shapes])


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
        processor = ctx.oracles[HF_ORACLE].processor_for(case.processor_kwargs)
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
    exercised = set(outcome.exercised) | ({ROWS} if compared else set())
    if len(subject_modalities(ctx)) > 1:
        exercised.add(MIXED)
        if mixed := mixed_difference(ctx, case):
            differences.append(mixed)
    return Outcome.judged(differences, exercised)


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
    for index in range(len(case.media) if HF_ORACLE in ctx.oracles else 0):
        try:
            hf = ctx.oracle_output(HF_ORACLE, case.single(index)).item_fields[modality][0]
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
              "along are impl's; beside items of another modality, each modality's placeholders "
              "and slices are those it has alone.",
    hint="a field cannot be cut per item: declare it in the sub-processor's model_input_names "
         "and keep one row layout (a leading batch dimension is dim 1); or a helper field "
         "the backend writes (`*_replacement_ids`) is not popped; or the backend's "
         "`_get_num_image_patches` / `_get_slice_dim` read the wrong count or dimension; "
         "or, in a mixed prompt, `_partition_keys_by_modality` gives a field to the wrong "
         "modality (an undeclared field or mask is claimed by none)",
    level="case", run=run, claims=claims,
    compared_with="each item processed alone; the HF processor; impl",
    proof=Proof("wrong-slice-dim", "idefics3", "alone vs batch"),
    matrix_fault="backend-field-entry-dropped",
    more_proofs=(Proof("backend-rows-per-token", "qwen2_vl", "image rows per item: vllm-backend",
                       subject=VLLM_BACKEND, sub_property=ROWS),
                 # runs where the backend takes two modalities: vLLM 0.32.0 on >= 5.18 (video)
                 Proof("backend-fields-one-modality", "qwen2_vl", "items (alone vs mixed)",
                       subject=VLLM_BACKEND, sub_property=MIXED),
                 Proof("backend-field-entry-dropped", "llava",
                       "(alone vs the HF processor).pixel_values: shape differs (dimension 3)",
                       subject=VLLM_BACKEND)),
)
