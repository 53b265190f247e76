"""prompt-ids: the subject's expanded prompt ids equal native vLLM's and the HF processor's."""

from __future__ import annotations

from conformance.checks.contract import PASS, Check, Outcome, Proof
from conformance.checks.differences import ids_difference
from conformance.inputs.cases import Case
from conformance.subjects.context import Context


def run(ctx: Context, case: Case) -> Outcome:
    """Against every oracle, each difference judged on its own (a known difference from one
    oracle never hides another from the other)."""
    actual = ctx.subject_output(case)
    found = []
    for name in ("vllm-native", "hf"):
        if name in ctx.oracles:
            difference = ids_difference(ctx.oracle_output(name, case).prompt_ids,
                                        actual.prompt_ids, (name, ctx.subject.name))
            if difference:
                found.append(f"vs {name}: {difference}")
    return Outcome.judged(found, set()) if found else PASS


CHECK = Check(
    id="prompt-ids",
    statement="The subject's expanded prompt ids equal native vLLM's and the HF processor's.",
    hint="the prompt ids differ from the HF processor's own expansion: check how the "
         "processor's replace_<modality>_token text tokenizes next to its neighbours",
    level="case", run=run,
    compared_with="native vLLM and the HF processor",
    proof=Proof("options-ignored", "qwen2_vl", "prompt ids differ"),
)
