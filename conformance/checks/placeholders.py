"""placeholders: per item, offset, length and embedding positions equal native vLLM's, with a
case's processor options model-level and (`option_forms`) in another form vLLM takes."""

from __future__ import annotations

from conformance.checks import option_forms
from conformance.checks.contract import Check, Outcome, Proof
from conformance.checks.differences import prompt_differences
from conformance.core.subjects import VLLM_BACKEND
from conformance.inputs.cases import Case
from conformance.subjects.context import Context


def run(ctx: Context, case: Case) -> Outcome:
    oracle = ctx.reference
    expected, actual = ctx.oracle_output(oracle, case), ctx.subject_output(case)
    found = [f"vs {oracle}: {d}" for d in
             prompt_differences(expected, actual, (oracle, ctx.subject.name))]
    requested, exercised = option_forms.differences(ctx, case, actual, prompt_differences)
    return Outcome.judged(found + requested, {option_forms.FORMS} if exercised else set(),
                          option_forms.inputs(case, requested))


CHECK = Check(
    id="placeholders",
    statement="Per item, placeholder offset, length and embedding positions equal native "
              "vLLM's, with processor options in every form vLLM takes.",
    hint="item ranges differ from native vLLM's: check which tokens the processor marks in "
         "mm_token_type_ids / the replacement text, and the embedding token; in another "
         "form: whether options in that form (scoped, per request as hf_processor_mm_kwargs, "
         "on disk) reach every processor call",
    level="case", run=run, claims=option_forms.claims,
    compared_with="native vLLM, else the HF processor",
    proof=Proof("offset-shift", "llava", "ranges differ"),
    matrix_fault="backend-offset-shift",
    more_proofs=(Proof("backend-request-options-ignored", "qwen2_vl",
                       "request-flat {'max_pixels': 784}: vs vllm-native: prompt ids differ",
                       subject=VLLM_BACKEND, sub_property=option_forms.FORMS),
                 Proof("backend-disk-options-ignored", "qwen2_vl",
                       "disk {'max_pixels': 784}: vs vllm-native: prompt ids differ",
                       subject=VLLM_BACKEND, sub_property=option_forms.FORMS),
                 Proof("backend-offset-shift", "llava", "ranges differ",
                       subject=VLLM_BACKEND)),
)
