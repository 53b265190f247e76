"""errors: inputs the backend cannot place give its clear error, never a silent misalignment.

Too many or too few items for the placeholders; adjacent audio placeholders on the Legacy path
(runs of the audio token cannot be told apart); a processor that reports no replacement
offsets on the Offsets path. Raising is acceptable for these inputs when the error (or its
cause, as a traceback shows it) says what is wrong: for a count mismatch the modality and one of
the counts, for a processor without offsets the missing offsets. Not raising is acceptable only
where native vLLM does not raise either and the output equals native's (vLLM leaves a
placeholder without an item as plain text, natively too).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from unittest import mock

from conformance.checks.contract import Check, Outcome, Proof
from conformance.checks.differences import error_text, prompt_difference
from conformance.core.subjects import VLLM_BACKEND, VLLM_NATIVE
from conformance.inputs.cases import Case
from conformance.subjects.context import Context
from conformance.subjects.protocol import HF_PROCESSOR


@contextlib.contextmanager
def without_offsets(hf_processor: Any) -> Iterator[None]:
    """The HF processor, as one that never reports `text_replacement_offsets`."""
    original = type(hf_processor).__call__

    def call(self, *args, **kwargs):
        kwargs.pop("return_text_replacement_offsets", None)
        out = original(self, *args, **kwargs)
        out.pop("text_replacement_offsets", None)
        return out

    with mock.patch.object(type(hf_processor), "__call__", call):
        yield


CLEAR_ERRORS = (ValueError, RuntimeError, NotImplementedError)


def names_the_mismatch(message: str, modality: str, counts: tuple[int, ...]) -> bool:
    """A count mismatch is clear when its message names the modality and one of the counts
    (items or placeholders) as a number: what a user must fix in the request."""
    # what a message quotes in braces (vLLM's "data={...} with kwargs={...}")
    # is the request's data, not an explanation: its numbers do not count
    previous = None
    while previous != message:
        previous, message = message, re.sub(r"\{[^{}]*\}", "", message)
    numbers = set(re.findall(r"(?<![\w.])\d+(?![\w.])", message))
    return modality in message.lower() and any(str(count) in numbers for count in counts)


def expect_error(ctx: Context, case: Case, what: str, needle: str = "",
                 native_may_agree: bool = True, patched: bool = False,
                 counts: tuple[int, ...] = ()) -> Outcome | None:
    """None when processing `case` raises a clear error (mentioning `needle`, or naming the
    modality and one of `counts`), or when it does not and native vLLM accepts the same input
    with the same output; else a failure. `patched`: the subject runs under a patch, so its
    usual output must not be reused."""
    try:
        out = ctx.subject.process(case) if patched else ctx.subject_output(case)
    except CLEAR_ERRORS as error:
        if needle and needle not in str(error):
            return Outcome(False, f"{what}: raised, but not the expected error: {error}")
        # judged on what a traceback shows: the error and its causes (vLLM wraps the
        # processor's own error in a "Failed to apply ..." that leaves its message out)
        cause = error.__cause__ or error.__context__
        if counts and not names_the_mismatch(f"{error} {cause or ''}", case.modality, counts):
            raised = type(error).__name__ + (f" from {cause!r}" if cause else "")
            return Outcome(False, f"{what}: raised {raised}, but the error names neither the "
                                  f"{case.modality} items nor their counts: {error}")
        return None
    except AssertionError as error:
        return Outcome(False, f"{what}: a bare assertion instead of a clear error: {error!r}")
    located = {m: len(p) for m, p in out.placeholders.items()}
    silent = Outcome(False, f"{what}: no error; {len(case.media)} items were placed as "
                            f"{located or 'nothing'}")
    if not native_may_agree:
        return silent
    if VLLM_NATIVE not in ctx.oracles:
        # vLLM leaves a placeholder without an item as plain text; what must not happen is an
        # item without exactly one placeholder
        placed = sum(located.values())
        return None if placed == len(case.media) else silent
    try:
        native = ctx.oracle_output(VLLM_NATIVE, case)
    except Exception as error:  # what native says is the evidence a finding can name
        said = " ".join(error_text(error).split())[:200]
        return Outcome(False, f"{what}: native vLLM rejects it ({said}), the subject accepts "
                              f"it ({len(case.media)} items placed as {located or 'nothing'})")
    if difference := prompt_difference(native, out, (VLLM_NATIVE, ctx.subject.name)):
        return Outcome(False, f"{what}: accepted, but unlike native vLLM: {difference}")
    return None


TOO_MANY = "more placeholders than items"
TOO_FEW = "fewer placeholders than items"
ADJACENT = "adjacent audio placeholders on the Legacy path"
NO_OFFSETS = "a processor without replacement offsets"
VALID = "the valid case itself"


def cases_for(ctx: Context, case: Case) -> list[tuple[Case, str, str, tuple[int, ...]]]:
    """(unplaceable variant of `case`, its sub-property, what it is in words, the counts a
    clear error names one of)."""
    n, items = case.num_placeholders, len(case.media)
    out = [(replace(case, segments=case.segments + ("",)), TOO_MANY,
            f"{n + 1} placeholders for {items} items", (items, n + 1))]
    if n >= 1 and case.media:
        out.append((replace(case, segments=case.segments[:-1]), TOO_FEW,
                    f"{n - 1} placeholders for {items} items", (items, n - 1)))
    if case.modality == "audio" and ctx.strategy == "legacy" and items >= 2:
        # The bare audio token, so that the runs it expands to touch
        token = getattr(ctx.subject.hf_processor(), "audio_token", None)
        adjacent = replace(case, segments=("",) * (items + 1), placeholder=token)
        out.append((adjacent, ADJACENT, ADJACENT, (items,)))
    return out


def claims(ctx: Context) -> tuple[str, ...]:
    """What every `errors` cell must have run: the valid case, both count mismatches, and on
    the Offsets path a processor without offsets (adjacent audio needs two audios: drawn)."""
    base = (VALID, TOO_MANY, TOO_FEW)
    offsets = ctx.strategy == "offsets" and HF_PROCESSOR in ctx.subject.capabilities
    return (*base, NO_OFFSETS) if offsets else base


def run(ctx: Context, case: Case) -> Outcome:
    """Each sub-case judged on its own: a known failure of one (a bare assert) hides nothing
    of the others. The subject must process the valid case: failing on every input is no
    clear error."""
    differences: list[str] = []
    inputs: dict[str, str] = {}  # each difference's unplaceable variant, by what it is
    exercised = {VALID}
    try:
        ctx.subject_output(case)
    except CLEAR_ERRORS + (AssertionError,) as error:
        differences.append(f"{VALID}: the subject cannot process it: {error_text(error)}")
    for bad, sub, what, counts in cases_for(ctx, case):
        exercised.add(sub)
        if failure := expect_error(ctx, bad, what, counts=counts):
            differences.append(failure.evidence)
            inputs[failure.evidence] = what
    if ctx.strategy == "offsets" and case.media and HF_PROCESSOR in ctx.subject.capabilities:
        exercised.add(NO_OFFSETS)
        with without_offsets(ctx.subject.hf_processor()):
            failure = expect_error(ctx, case, NO_OFFSETS, "offsets", native_may_agree=False,
                                   patched=True)
        if failure:
            differences.append(failure.evidence)
            inputs[failure.evidence] = NO_OFFSETS
    return Outcome.judged(differences, exercised, inputs)


CHECK = Check(
    id="errors",
    statement="Unplaceable inputs raise a clear error (naming the modality and a count, or "
              "the missing offsets) instead of misaligning, and valid ones are processed.",
    hint="a mismatched prompt is accepted silently or rejected by a bare assert, or the "
         "subject rejects valid input too",
    level="case", run=run, claims=claims,
    compared_with="the error contract: a clear error naming the modality and a count",
    proof=Proof("errors-swallowed", "llava", "accept"),  # "accepts it" / "accepted, but unlike"
    matrix_fault="backend-errors-swallowed",
    # Offsets: "native vLLM rejects it ..., the subject accepts it"; Legacy (its error for too
    # many placeholders swallowed): "accepted, but unlike native vLLM"
    more_proofs=(Proof("backend-errors-swallowed", "llava", "accept", subject=VLLM_BACKEND),),
)
