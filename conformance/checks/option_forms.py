"""The "option forms" sub-property that prompt-ids, placeholders and cache share.

vLLM takes processor options in several forms (`conformance.inputs.forms`): model-level flat
(`LLM(mm_processor_kwargs=opts)`, how the suites give a case's options), model-level scoped by
modality (`{"images_kwargs": opts}`), per request (a prompt's `mm_processor_kwargs`, handed to
the processor as `hf_processor_mm_kwargs`, and part of the processor cache's key; flat or
scoped), and on disk in the checkpoint's own processor config. A case with options carries one
form besides model-flat (`Case.option_form`); the subject processes it in that form, which must
equal what native vLLM gives for the same form (else, or where native vLLM's own handling of
the form is unreliable, `forms.NATIVE_SCOPED_UNRELIABLE`, the HF processor's given them in the
same form: scoped ones as a call kwarg, the disk form from the same copy of the checkpoint);
per request flat also the subject's own output with them model-flat. A form need not mean what
model-flat means: transformers takes some options at construction only (Qwen2-VL's
`max_pixels`: scoped, it is not applied, by native vLLM and the HF processor alike), so the
other forms are compared with the oracles alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from conformance.checks.differences import Names, error_text, ids_difference
from conformance.core.subjects import HF, VLLM_NATIVE
from conformance.inputs.cases import Case
from conformance.inputs.forms import (
    NATIVE_SCOPED_UNRELIABLE,
    REQUEST_FLAT,
    REQUEST_FORMS,
    SCOPED_FORMS,
    form_inputs,
)
from conformance.subjects.context import Context, in_form
from conformance.subjects.isolation import processor_defaults_fresh
from impl.types import ProcessedPrompt

FORMS = "option forms"
ENGINE_ORDER = "engine order"  # the step of it that gives one key in two forms

# The differences of two outputs a check compares (expected first), named as `Names` says
Compare = Callable[[ProcessedPrompt, ProcessedPrompt, Names], list[str]]


def ids_only(expected: ProcessedPrompt, actual: ProcessedPrompt, names: Names) -> list[str]:
    difference = ids_difference(expected.prompt_ids, actual.prompt_ids, names)
    return [difference] if difference else []


def claims(ctx: Context) -> tuple[str, ...]:
    """Claimed only where the suites draw option sets (the recipe has some): a cell that never
    draws one never exercises it."""
    return (FORMS,) if ctx.recipe.processor_options else ()


def label(case: Case) -> str:
    return f"{case.option_form} {dict(case.processor_kwargs)}"


def inputs(case: Case, found: list[str]) -> dict[str, str]:
    """Each difference of the case's options in their form, by the form it was found in."""
    return {text: case.option_form for text in found}


def exercised(case: Case) -> bool:
    return bool(case.processor_kwargs and case.option_form)


def reference(ctx: Context, case: Case) -> str:
    """The oracle the case's form is compared with: the check's reference, but the HF processor
    for a scoped form where native vLLM's own handling of it is unreliable."""
    if case.option_form in SCOPED_FORMS and ctx.recipe.name.partition("~")[0] in \
            NATIVE_SCOPED_UNRELIABLE:
        return HF
    return ctx.reference


def subject_output(ctx: Context, case: Case) -> tuple[ProcessedPrompt | None, list[str]]:
    """The subject's output for the case's options in its form, or None and the difference its
    raising is: it is only asked after it processed them model-level, so the error is the
    form's alone (a crash would hide the other sub-properties)."""
    try:
        return ctx.subject_form_output(case), []
    except Exception as error:
        return None, [f"{label(case)}: {ctx.subject.name} raised where it processes them as "
                      f"model-level options: {error_text(error)}"]


def second_request(ctx: Context, case: Case, compare: Compare) -> list[str]:
    """The request twice in one deployment, the second after what the first left behind:
    processors write the options their count helper is given into their class's defaults
    (`conformance.subjects.isolation`), so a form the count helper misreads can break every
    later request. The second must give what the first gave (the same output, or the same
    error)."""

    def attempt() -> ProcessedPrompt | str:
        try:
            return in_form(ctx.subject, case, fresh=False)
        except Exception as error:
            return error_text(error)

    with processor_defaults_fresh():
        first, again = attempt(), attempt()
    if isinstance(again, str):
        if again == first:
            return []  # the same refusal: the first request's difference says it
        return [f"{label(case)}: a second request in the same deployment raised: {again}"]
    if isinstance(first, str):
        return [f"{label(case)}: a second request in the same deployment was processed where "
                f"the first raised {first}"]
    return [f"{label(case)}: a second request in the same deployment vs the first: {text}"
            for text in compare(first, again, ("first", "second"))]


def engine_order(ctx: Context, case: Case, compare: Compare) -> list[str]:
    """Which form wins where one key is given in two: a deployment giving the case's boolean
    options flipped model-level (flat) and the request giving them in the case's request form,
    as vLLM's engine merges the two (`get_merged_mm_kwargs`: the request's keys over the
    model's, a scoped group beside a flat key), against native vLLM given the same (where it
    is the form's oracle; the HF processor has no model level to tell apart). A case without
    a boolean option, or in a model-level or disk form, has no such pair."""
    flipped = tuple((k, not v) for k, v in case.processor_kwargs if isinstance(v, bool))
    if case.option_form not in REQUEST_FORMS or not flipped or \
            reference(ctx, case) != VLLM_NATIVE:
        return []
    request = form_inputs(case.option_form, case.processor_kwargs, case.modality, "").request
    deployment = replace(case, processor_kwargs=flipped, option_form="")

    def run(party: Any) -> ProcessedPrompt:
        return in_form(party, deployment, request_kwargs=request)

    theirs = ctx.oracle_derived("vllm-native engine order", case,
                                lambda: run(ctx.oracles[VLLM_NATIVE]))
    if theirs is None:  # native rejects the pair: nothing to compare
        return []
    where = (f"{ENGINE_ORDER} {dict(flipped)} model-level, {request} in the request: vs "
             f"{VLLM_NATIVE}")
    try:
        mine = run(ctx.subject)
    except Exception as error:
        # worded as the form's own raising (`subject_output`): the same cause, the same words
        return [f"{where}: {ctx.subject.name} raised where it processes them as model-level "
                f"options: {error_text(error)}"]
    return [f"{where}: {text}" for text in compare(theirs, mine, (VLLM_NATIVE,
                                                                 ctx.subject.name))]


def differences(ctx: Context, case: Case, model_level: ProcessedPrompt,
                compare: Compare) -> tuple[list[str], bool]:
    """The subject's output with the case's options in its form against the form's reference
    oracle's (`reference`; an oracle that rejects it is not compared) and, per request flat,
    against `model_level`, the subject's own with them model-flat (vLLM's contract: a
    request's option overrides the model-level one of its name); and whether the
    sub-property was exercised (a case without options has no other form)."""
    if not exercised(case):
        return [], False
    mine, found = subject_output(ctx, case)
    found += second_request(ctx, case, compare)
    found += engine_order(ctx, case, compare)
    if mine is None:
        return found, True
    subject, oracle = ctx.subject.name, reference(ctx, case)
    if (theirs := ctx.oracle_form_output(oracle, case)) is not None:
        if oracle != ctx.reference:  # the HF processor standing in: its ids alone (its item
            # ranges are the check's reference's to say, where it has one: native vLLM)
            compare = ids_only
        found += [f"{label(case)}: vs {oracle}: {text}"
                  for text in compare(theirs, mine, (oracle, subject))]
    if case.option_form == REQUEST_FLAT:
        found += [f"{label(case)}: vs {subject} model-level: {text}"
                  for text in compare(model_level, mine, (f"{subject} model-level",
                                                          f"{subject} {case.option_form}"))]
    return found, True


def cached_request(party: Any, case: Case) -> dict[str, Any] | None:
    """Through one cache of `party`'s default processor: the case's items without options,
    then the same request with the case's options in its form (a request form: a model-level
    form or the disk form is another deployment, with a cache of its own); its output and
    the cache hits it made, and the hits the same request makes through an empty cache (the
    items it repeats: any more came from the items without options, whose key must differ).
    None where the form is no request form or the items without options cannot be processed
    (the default options' own failure, judged in their search: nothing was cached to hit).
    Every request starts from the defaults a deployment without model-level options has
    (`in_form`)."""
    if case.option_form not in REQUEST_FORMS:
        return None
    cache = party.new_cache(())
    try:
        with processor_defaults_fresh():
            party.process(replace(case, processor_kwargs=()), cache=cache)
    except Exception:
        return None
    empty = party.new_cache(())
    in_form(party, case, cache=empty)
    before = cache.make_stats().hits
    requested = in_form(party, case, cache=cache)
    return {"requested": requested, "hits": cache.make_stats().hits - before,
            "own hits": empty.make_stats().hits}
