"""The "request options" sub-property that prompt-ids, placeholders and cache share.

vLLM takes processor options at two levels: the model's (`LLM(mm_processor_kwargs=...)`, how
the suites give a case's options) and each request's own (its `mm_processor_kwargs`, handed to
the processor as `hf_processor_mm_kwargs`, and part of the processor cache's key). A case with
options is also processed by the subject's default processor with them given per request: that
must equal native vLLM's output for the same request (else the HF processor's, which takes
options as call kwargs either way) and the subject's own output with them model-level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from conformance.checks.differences import Names, error_text
from conformance.inputs.cases import Case
from conformance.subjects.context import Context, per_request
from conformance.subjects.isolation import processor_defaults_fresh
from impl.types import ProcessedPrompt

REQUEST = "request options"

# The differences of two outputs a check compares (expected first), named as `Names` says
Compare = Callable[[ProcessedPrompt, ProcessedPrompt, Names], list[str]]


def claims(ctx: Context) -> tuple[str, ...]:
    """Claimed only where the suites draw option sets (the recipe has some): a cell that never
    draws one never exercises it."""
    return (REQUEST,) if ctx.recipe.processor_options else ()


def label(case: Case) -> str:
    return f"{REQUEST} {dict(case.processor_kwargs)}"


def subject_output(ctx: Context, case: Case) -> tuple[ProcessedPrompt | None, list[str]]:
    """The subject's output for the case's options given per request, or None and the
    difference its raising is: it is only asked after it processed them model-level, so the
    error is the request level's alone (a crash would hide the other sub-properties)."""
    try:
        return ctx.subject_request_output(case), []
    except Exception as error:
        return None, [f"{label(case)}: {ctx.subject.name} raised where it processes them as "
                      f"model-level options: {error_text(error)}"]


def differences(ctx: Context, case: Case, model_level: ProcessedPrompt,
                compare: Compare) -> tuple[list[str], bool]:
    """The subject's output with the case's options per request against the reference oracle's
    for the same request (`ctx.reference`; an oracle that rejects it is not compared) and
    against `model_level`, the subject's own with them model-level; and whether the
    sub-property was exercised (a case without options has nothing to give per request)."""
    if not case.processor_kwargs:
        return [], False
    mine, found = subject_output(ctx, case)
    if mine is None:
        return found, True
    subject, oracle = ctx.subject.name, ctx.reference
    if (theirs := ctx.oracle_request_output(oracle, case)) is not None:
        found += [f"{label(case)}: vs {oracle}: {text}"
                  for text in compare(theirs, mine, (oracle, subject))]
    found += [f"{label(case)}: vs {subject} model-level: {text}"
              for text in compare(model_level, mine,
                                  (f"{subject} model-level", f"{subject} per request"))]
    return found, True


def cached_request(party: Any, case: Case) -> dict[str, Any] | None:
    """Through one cache of `party`'s default processor: the case's items without options,
    then the same request with the case's options per request; its output and the cache hits
    it made, and the hits the same request makes through an empty cache (the items it repeats:
    any more came from the items without options, whose key must differ). None where the
    items without options cannot be processed (the default options' own failure, judged in
    their search: nothing was cached to hit). Every request starts from the defaults a
    deployment without model-level options has (`per_request`)."""
    cache = party.new_cache(())
    try:
        with processor_defaults_fresh():
            party.process(replace(case, processor_kwargs=()), cache=cache)
    except Exception:
        return None
    empty = party.new_cache(())
    per_request(party, case, cache=empty)
    before = cache.make_stats().hits
    requested = per_request(party, case, cache=cache)
    return {"requested": requested, "hits": cache.make_stats().hits - before,
            "own hits": empty.make_stats().hits}
