"""placeholders: per item, offset, length and embedding positions equal native vLLM's."""

from __future__ import annotations

from conformance.cases import Case
from conformance.checks.base import (
    PASS,
    Context,
    Outcome,
    ids_difference,
    placeholders_difference,
)

ID = "placeholders"
STATEMENT = "Per item, placeholder offset, length and embedding positions equal native vLLM's."


def run(ctx: Context, case: Case) -> Outcome:
    oracle = "vllm-native" if "vllm-native" in ctx.oracles else "hf"
    expected, actual = ctx.oracle_output(oracle, case), ctx.subject.process(case)
    # Ranges in different prompts cannot be compared position by position
    difference = ids_difference(expected.prompt_ids, actual.prompt_ids)
    difference = difference or placeholders_difference(expected, actual)
    return Outcome(False, f"vs {oracle}: {difference}") if difference else PASS
