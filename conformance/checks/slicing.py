"""slicing: each item's slice of every processor output field holds exactly that item's rows.

Two sub-properties, each judged on its own: an item's fields are the same in the batch as
processed alone by the subject (nothing of its neighbours), and processed alone they are the
HF processor's outputs for that item alone plus the per-item count the backend derives, no
more (a helper field the backend should have popped reaches the model as a keyword argument).
"""

from __future__ import annotations

from conformance.checks.contract import Check, Outcome, Proof
from conformance.checks.differences import served_form, value_difference
from conformance.inputs.cases import Case
from conformance.subjects.context import Context, OracleFailed

ALONE = "alone vs batch"
HF = "alone vs the HF processor"
# The per-item counts the backend writes itself (its `_MODALITY_SIZE_KEYS`; video from vLLM
# 0.32.0, whose backend takes it), no HF output
COUNT_FIELDS = {"image": "num_image_patches", "audio": "num_audio_tokens",
                "video": "num_video_patches"}


def claims(ctx: Context) -> tuple[str, ...]:
    return (ALONE, HF)


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
              "those are the HF processor's for it plus the backend's per-item count.",
    hint="a field cannot be cut per item: declare it in the sub-processor's model_input_names "
         "and keep one row layout (a leading batch dimension is dim 1); or a helper field "
         "the backend writes (`*_replacement_ids`) is not popped",
    level="case", run=run, claims=claims,
    proof=Proof("wrong-slice-dim", "idefics3", "alone vs batch"),
)
