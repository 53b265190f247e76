"""prompt-ids: the subject's expanded prompt ids equal native vLLM's and the HF processor's."""

from __future__ import annotations

from conformance.cases import Case
from conformance.checks.base import PASS, Context, Outcome, ids_difference

ID = "prompt-ids"
STATEMENT = "The subject's expanded prompt ids equal native vLLM's and the HF processor's."


def run(ctx: Context, case: Case) -> Outcome:
    actual = ctx.subject.process(case)
    for name in ("vllm-native", "hf"):
        if name in ctx.oracles:
            difference = ids_difference(ctx.oracle_output(name, case).prompt_ids,
                                        actual.prompt_ids)
            if difference:
                return Outcome(False, f"vs {name}: {difference}")
    return PASS
