"""errors: inputs the backend cannot place give its clear error, never a silent misalignment.

Too many or too few items for the placeholders; adjacent audio placeholders on the Legacy path
(runs of the audio token cannot be told apart); a processor that reports no replacement
offsets on the Offsets path. Raising is always acceptable for these inputs; not raising is
acceptable only where native vLLM does not raise either and the output equals native's (vLLM
leaves a placeholder without an item as plain text, natively too).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any
from unittest import mock

from conformance.checks.contract import PASS, Check, Outcome, Proof
from conformance.checks.differences import prompt_difference
from conformance.inputs.cases import Case
from conformance.subjects.context import Context


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


def expect_error(ctx: Context, case: Case, what: str, needle: str = "",
                 native_may_agree: bool = True) -> Outcome | None:
    """None when processing `case` raises a clear error (mentioning `needle`), or when it
    does not and native vLLM accepts the same input with the same output; else a failure."""
    try:
        out = ctx.subject.process(case)
    except CLEAR_ERRORS as error:
        if needle and needle not in str(error):
            return Outcome(False, f"{what}: raised, but not the expected error: {error}")
        return None
    except AssertionError as error:
        return Outcome(False, f"{what}: a bare assertion instead of a clear error: {error!r}")
    located = {m: len(p) for m, p in out.placeholders.items()}
    silent = Outcome(False, f"{what}: no error; {len(case.media)} items were placed as "
                            f"{located or 'nothing'}")
    if not native_may_agree:
        return silent
    if "vllm-native" not in ctx.oracles:
        # vLLM leaves a placeholder without an item as plain text; what must not happen is an
        # item without exactly one placeholder
        placed = sum(located.values())
        return None if placed == len(case.media) else silent
    try:
        native = ctx.oracle_output("vllm-native", case)
    except Exception:
        return Outcome(False, f"{what}: native vLLM rejects it, the subject accepts it "
                              f"({len(case.media)} items placed as {located or 'nothing'})")
    if difference := prompt_difference(native, out, ("vllm-native", ctx.subject.name)):
        return Outcome(False, f"{what}: accepted, but unlike native vLLM: {difference}")
    return None


def cases_for(ctx: Context, case: Case) -> list[tuple[Case, str]]:
    n = case.num_placeholders
    out = [(replace(case, segments=case.segments + ("",)),
            f"{n + 1} placeholders for {len(case.media)} items")]
    if n >= 1 and case.media:
        out.append((replace(case, segments=case.segments[:-1]),
                    f"{n - 1} placeholders for {len(case.media)} items"))
    if case.modality == "audio" and ctx.strategy == "legacy" and len(case.media) >= 2:
        # The bare audio token, so that the runs it expands to touch
        token = getattr(ctx.subject.hf_processor(), "audio_token", None)
        adjacent = replace(case, segments=("",) * (len(case.media) + 1), placeholder=token)
        out.append((adjacent, "adjacent audio placeholders on the Legacy path"))
    return out


def run(ctx: Context, case: Case) -> Outcome:
    for bad, what in cases_for(ctx, case):
        if failure := expect_error(ctx, bad, what):
            return failure
    if ctx.strategy == "offsets" and case.media and hasattr(ctx.subject, "hf_processor"):
        with without_offsets(ctx.subject.hf_processor()):
            failure = expect_error(ctx, case, "a processor without replacement offsets",
                                   "offsets", native_may_agree=False)
        if failure:
            return failure
    return PASS


CHECK = Check(
    id="errors",
    statement="Unplaceable inputs raise the backend's clear error instead of misaligning.",
    hint="a mismatched prompt is accepted silently or rejected by a bare assert",
    level="case", run=run,
    proof=Proof("errors-swallowed", "llava", "accept"),  # "accepts it" / "accepted, but unlike"
)
