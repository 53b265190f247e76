"""cache: processing is a pure function of each item, so caching items by hash is sound.

Each sub-property is judged on its own (a known failure of one hides nothing of the others):
a text prompt and its token ids give the same output; with vLLM's processor cache on and off
the outputs are equal, a repeated request hits the cache and returns the same, a request whose
first item alone was cached before (a partial hit) and one whose items were cached in the other
order (a reordered hit) give what they give uncached, and the backend's cached outputs equal
native vLLM's through native's own cache; an item's hash and data are the same alone and inside
the batch, in either order; a case's options given per request (`option_forms`, flat or
scoped) after its items were cached without them hit none of those items (no more hits than
through an empty cache) and give what the request gives uncached, and what native's cache
gives for the same requests.
"""

from __future__ import annotations

from typing import Any

from conformance.checks import option_forms
from conformance.checks.contract import Check, Outcome, Proof
from conformance.checks.differences import (
    error_text,
    output_difference,
    prompt_difference,
    value_difference,
)
from conformance.core.subjects import VLLM_BACKEND, VLLM_NATIVE
from conformance.inputs.cases import Case
from conformance.subjects.context import Context
from conformance.subjects.protocol import CACHE

FORM = "prompt form"
ON_OFF = "cache on vs off"
REPEATED = "repeated request"
PARTIAL = "partial hit"
REORDERED = "reordered hit"
NATIVE = "cached vs native's cache"
ALONE = "alone vs batch"
ORDER = "order"
FORMS = option_forms.FORMS


def claims(ctx: Context) -> tuple[str, ...]:
    cached = CACHE in ctx.subject.capabilities
    several = ctx.recipe.max_items >= 2
    return (FORM, ALONE, *((ON_OFF, REPEATED) if cached else ()),
            *((PARTIAL, REORDERED) if cached and several else ()),
            *((NATIVE,) if cached and VLLM_NATIVE in ctx.oracles else ()),
            *((ORDER,) if several else ()),
            *(option_forms.claims(ctx) if cached else ()))


def cached_sequence(subject: Any, case: Case) -> dict[str, Any]:
    """The requests a server sees, through one processor cache: the case, again, its first item
    alone then the case (a partial hit), and the case with its items reversed (a reordered
    hit, each item cached before)."""
    out: dict[str, Any] = {}
    cache = subject.new_cache(case.processor_kwargs)
    out["first"] = subject.process(case, cache=cache)
    out["second"] = subject.process(case, cache=cache)
    out["hits"] = cache.make_stats().hits
    if len(case.media) > 1:
        partial = subject.new_cache(case.processor_kwargs)
        subject.process(case.single(0), cache=partial)
        out["partial"] = subject.process(case, cache=partial)
        out["reordered"] = subject.process(case.with_media(tuple(reversed(case.media))),
                                           cache=cache)
    return out


def run(ctx: Context, case: Case) -> Outcome:
    subject, modality = ctx.subject, case.modality
    differences: list[str] = []
    exercised = {FORM, ALONE}
    base = ctx.subject_output(case)
    flipped = (ctx.subject_output(case.with_media(tuple(reversed(case.media))))
               if len(case.media) > 1 else None)
    if difference := output_difference(base, subject.process(case, as_tokens=True)):
        differences.append(f"token prompt vs text prompt: {difference}")
    if CACHE in subject.capabilities:
        mine = cached_sequence(subject, case)
        exercised |= {ON_OFF, REPEATED}
        if difference := output_difference(base, mine["first"]):
            differences.append(f"cache on vs off: {difference}")
        if difference := output_difference(mine["first"], mine["second"]):
            differences.append(f"second identical request (cached) vs first: {difference}")
        if case.media and mine["hits"] == 0:
            differences.append("a second identical request did not hit the processor cache")
        if "partial" in mine:
            exercised |= {PARTIAL, REORDERED}
            if difference := output_difference(base, mine["partial"]):
                differences.append(f"partial hit (item 0 cached alone before) vs uncached: "
                                   f"{difference}")
            if difference := output_difference(flipped, mine["reordered"]):
                differences.append(f"reordered hit (items cached in the other order) vs "
                                   f"uncached: {difference}")
        if VLLM_NATIVE in ctx.oracles:
            native = ctx.oracle_derived(  # None: native rejects the case, nothing to compare
                "vllm-native cached", case,
                lambda: cached_sequence(ctx.oracles[VLLM_NATIVE], case))
            if native is not None:
                exercised.add(NATIVE)
                for step in ("second", "partial", "reordered"):
                    if step in native and step in mine and (difference := prompt_difference(
                            native[step], mine[step], (VLLM_NATIVE, ctx.subject.name))):
                        differences.append(f"{step} request through each one's cache: "
                                           f"{difference}")
                        break
    for index in range(len(case.media)):
        alone = ctx.subject_output(case.single(index))
        batch_hash = base.item_hashes.get(modality, ())[index:index + 1]
        alone_hash = alone.item_hashes.get(modality, ())[:1]
        if batch_hash != alone_hash:
            differences.append(f"{modality} item {index}: hash {batch_hash} in the batch but "
                               f"{alone_hash} alone: the hash depends on its neighbours")
            break
        if difference := value_difference(alone.item_fields.get(modality, [{}])[0],
                                          base.item_fields.get(modality, [])[index],
                                          f"{modality} item {index} alone vs in batch"):
            differences.append(difference)
            break
    if flipped is not None:
        exercised.add(ORDER)
        differences += order_differences(case, base, flipped)[:1]
    inputs: dict[str, str] = {}
    if CACHE in subject.capabilities and option_forms.exercised(case):
        found, requested = form_differences(ctx, case)
        differences += found
        inputs = option_forms.inputs(case, found)
        exercised |= {FORMS} if requested else set()
    return Outcome.judged(differences, exercised, inputs)


def form_differences(ctx: Context, case: Case) -> tuple[list[str], bool]:
    """The case's options in its form; a request form through a cache that holds its items
    processed without them (`option_forms.cached_request`): against the same request uncached,
    its hits against its hits through an empty cache, and against native vLLM's cache given
    the same requests; and whether that was compared (not where the items cannot be processed
    without the options, nor for a model-level or disk form: another deployment, another
    cache)."""
    uncached, found = option_forms.subject_output(ctx, case)
    if uncached is None:  # raising in the form is the difference; a cache changes nothing
        return found, True
    label = option_forms.label(case)
    try:
        mine = option_forms.cached_request(ctx.subject, case)
    except Exception as error:  # it processed the same request uncached
        return [f"{label}: through the cache after its items without them: raised "
                f"{error_text(error)}"], True
    if mine is None:
        return [], False
    if difference := output_difference(uncached, mine["requested"]):
        found.append(f"{label}: after its items were cached without them vs uncached: "
                     f"{difference}")
    if mine["hits"] != mine["own hits"]:
        found.append(f"{label}: the request hit {mine['hits']} cached item(s) after its items "
                     f"were cached without them, {mine['own hits']} through an empty cache: "
                     "the cache key leaves out the request's options")
    if option_forms.reference(ctx, case) == VLLM_NATIVE:  # where native is the form's oracle
        native = ctx.oracle_derived(  # None: native rejects the requests, nothing to compare
            "vllm-native cached per request", case,
            lambda: option_forms.cached_request(ctx.oracles[VLLM_NATIVE], case))
        if native is not None and (difference := prompt_difference(
                native["requested"], mine["requested"], (VLLM_NATIVE, ctx.subject.name))):
            found.append(f"{label}: its items cached without them first, then the request "
                         f"through each one's cache: {difference}")
    return found, True


def order_differences(case: Case, base: Any, flipped: Any) -> list[str]:
    modality, count, out = case.modality, len(case.media), []
    for index in range(count):
        mirror = count - 1 - index
        if difference := value_difference(
            base.item_fields.get(modality, [])[index],
            flipped.item_fields.get(modality, [])[mirror],
            f"{modality} item {index} vs the same item at {mirror} in reversed order",
        ):
            out.append(difference)
        if base.item_hashes.get(modality, ())[index:index + 1] != \
                flipped.item_hashes.get(modality, ())[mirror:mirror + 1]:
            out.append(f"{modality} item {index}: hash changes when the order of items is "
                       "reversed")
    return out


CHECK = Check(
    id="cache",
    statement="Outputs are independent of the cache (repeated, partial and reordered hits, "
              "and as native's cache gives them), of neighbours and order, and of prompt form; "
              "a request's own processor options are part of its items' cache key.",
    hint="an item's processed data depends on its neighbours or on the prompt form: batch "
         "padding that image_sizes does not describe, or a hash that is not per item",
    level="case", run=run, claims=claims,
    compared_with="the subject uncached, alone and in order; native vLLM's cache",
    proof=Proof("hash-neighbours", "llava", "depends on its neighbours"),
    matrix_fault="backend-hash-per-request",
    # the Offsets path words it as a cache hit, the Legacy path (no processor cache of its
    # own) as the ids native's cache gives
    more_proofs=(Proof("backend-request-options-ignored", "qwen2_vl",
                       "{'max_pixels': 784}: ",  # either request form, whichever is drawn
                       subject=VLLM_BACKEND, sub_property=FORMS),
                 # the Offsets path (the Legacy path keeps no processor cache of its own)
                 Proof("backend-cache-key-without-options>=5.15", "qwen2_vl",
                       "the cache key leaves out the request's options",
                       subject=VLLM_BACKEND, sub_property=FORMS),
                 Proof("backend-hash-per-request", "llava",
                       "token prompt vs text prompt: item hashes differ", subject=VLLM_BACKEND),
                 # the comparisons through the cache compare every field, not only the ids
                 # (the Offsets path: on the Legacy path the backend keeps no processor cache)
                 Proof("backend-cache-stale-fields>=5.15", "llava",
                       "second identical request (cached) vs first: image fields",
                       subject=VLLM_BACKEND, sub_property=REPEATED)),
)
