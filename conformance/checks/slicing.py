"""slicing: each item's slice of every processor output field holds exactly that item's rows."""

from __future__ import annotations

from conformance.checks.contract import PASS, Check, Outcome, Proof
from conformance.checks.differences import value_difference
from conformance.inputs.cases import Case
from conformance.subjects.context import Context


def run(ctx: Context, case: Case) -> Outcome:
    batch = ctx.subject_output(case).item_fields.get(case.modality, [])
    if len(batch) != len(case.media):
        return Outcome(False, f"{len(batch)} {case.modality} field slices for "
                              f"{len(case.media)} items")
    for index in range(len(case.media)):
        alone = ctx.subject_output(case.single(index)).item_fields.get(case.modality, [{}])[0]
        if difference := value_difference(alone, batch[index],
                                          f"{case.modality} item {index} (alone vs batch)"):
            return Outcome(False, difference)
    return PASS


CHECK = Check(
    id="slicing",
    statement="Each item's field slices equal the fields of that item processed alone.",
    hint="a field cannot be cut per item: declare it in the sub-processor's model_input_names "
         "and keep one row layout (a leading batch dimension is dim 1)",
    level="case", run=run,
    proof=Proof("wrong-slice-dim", "idefics3", "alone vs batch"),
)
