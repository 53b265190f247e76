"""placeholders: per item, offset, length and embedding positions equal native vLLM's."""

from __future__ import annotations

from conformance.checks.contract import PASS, Check, Outcome, Proof
from conformance.checks.differences import prompt_differences
from conformance.inputs.cases import Case
from conformance.subjects.context import Context


def run(ctx: Context, case: Case) -> Outcome:
    oracle = ctx.reference
    expected, actual = ctx.oracle_output(oracle, case), ctx.subject_output(case)
    found = prompt_differences(expected, actual, (oracle, ctx.subject.name))
    return Outcome.judged([f"vs {oracle}: {d}" for d in found], set()) if found else PASS


CHECK = Check(
    id="placeholders",
    statement="Per item, placeholder offset, length and embedding positions equal native "
              "vLLM's.",
    hint="item ranges differ from native vLLM's: check which tokens the processor marks in "
         "mm_token_type_ids / the replacement text, and the embedding token",
    level="case", run=run,
    compared_with="native vLLM, else the HF processor",
    proof=Proof("offset-shift", "llava", "ranges differ"),
)
