"""prompt-ids: the subject's expanded prompt ids equal native vLLM's and the HF processor's,
with a case's processor options model-level and (`option_forms`) in another form vLLM takes."""

from __future__ import annotations

from conformance.checks import option_forms
from conformance.checks.contract import Check, Outcome, Proof
from conformance.checks.differences import Names, ids_difference
from conformance.core.subjects import HF, VLLM_BACKEND, VLLM_NATIVE
from conformance.inputs.cases import Case
from conformance.subjects.context import Context
from impl.types import ProcessedPrompt


def ids_differences(expected: ProcessedPrompt, actual: ProcessedPrompt, names: Names
                    ) -> list[str]:
    difference = ids_difference(expected.prompt_ids, actual.prompt_ids, names)
    return [difference] if difference else []


def run(ctx: Context, case: Case) -> Outcome:
    """Against every oracle, each difference judged on its own (a known difference from one
    oracle never hides another from the other)."""
    actual = ctx.subject_output(case)
    found = []
    for name in (VLLM_NATIVE, HF):
        if name in ctx.oracles:
            found += [f"vs {name}: {difference}" for difference in ids_differences(
                ctx.oracle_output(name, case), actual, (name, ctx.subject.name))]
    requested, exercised = option_forms.differences(ctx, case, actual, ids_differences)
    return Outcome.judged(found + requested, {option_forms.FORMS} if exercised else set(),
                          option_forms.inputs(case, requested))


CHECK = Check(
    id="prompt-ids",
    statement="The subject's expanded prompt ids equal native vLLM's and the HF processor's, "
              "with processor options in every form vLLM takes.",
    hint="the prompt ids differ from the HF processor's own expansion: check how the "
         "processor's replace_<modality>_token text tokenizes next to its neighbours; in "
         "another form: whether options in that form (scoped, per request as "
         "hf_processor_mm_kwargs, on disk) reach every processor call",
    level="case", run=run, claims=option_forms.claims,
    compared_with="native vLLM and the HF processor",
    proof=Proof("options-ignored", "qwen2_vl", "prompt ids differ"),
    matrix_fault="backend-bos-doubled",
    more_proofs=(Proof("backend-request-options-ignored", "qwen2_vl",
                       "request-flat {'max_pixels': 784}: vs vllm-native: prompt ids differ",
                       subject=VLLM_BACKEND, sub_property=option_forms.FORMS),
                 # either scoped form: model-level or per request, whichever the search draws;
                 # on Aya Vision (Qwen2-VL's max_pixels, scoped, means nothing to transformers)
                 Proof("backend-scoped-options-ignored", "aya_vision",
                       "scoped {'crop_to_patches': False}: vs hf: prompt ids differ",
                       subject=VLLM_BACKEND, sub_property=option_forms.FORMS),
                 Proof("backend-bos-doubled", "llava",
                       "vs vllm-native: prompt ids differ at position 1", subject=VLLM_BACKEND)),
)
