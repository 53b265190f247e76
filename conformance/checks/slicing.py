"""slicing: each item's slice of every processor output field holds exactly that item's rows."""

from __future__ import annotations

from conformance.cases import Case
from conformance.checks.base import PASS, Context, Outcome
from conformance.checks.compare import value_difference

ID = "slicing"
STATEMENT = "Each item's field slices equal the fields of that item processed alone."


def run(ctx: Context, case: Case) -> Outcome:
    batch = ctx.subject.process(case).item_fields.get(case.modality, [])
    if len(batch) != len(case.media):
        return Outcome(False, f"{len(batch)} {case.modality} field slices for "
                              f"{len(case.media)} items")
    for index in range(len(case.media)):
        alone = ctx.subject.process(case.single(index)).item_fields.get(case.modality, [{}])[0]
        if difference := value_difference(alone, batch[index],
                                          f"{case.modality} item {index} (alone vs batch)"):
            return Outcome(False, difference)
    return PASS
