"""cache: processing is a pure function of each item, so caching items by hash is sound.

With vLLM's processor cache on and off the outputs are equal; a second identical request hits
the cache and returns the same; an item's hash and data are the same alone and inside the
batch, in either order; a text prompt and its token ids give the same output.
"""

from __future__ import annotations

from conformance.checks.contract import PASS, Check, Outcome, Proof
from conformance.checks.differences import output_difference, value_difference
from conformance.inputs.cases import Case
from conformance.subjects.context import Context


def run(ctx: Context, case: Case) -> Outcome:
    subject = ctx.subject
    base = ctx.subject_output(case)
    if difference := output_difference(base, subject.process(case, as_tokens=True)):
        return Outcome(False, f"token prompt vs text prompt: {difference}")
    if hasattr(subject, "new_cache"):
        cache = subject.new_cache(case.processor_kwargs)
        first = subject.process(case, cache=cache)
        if difference := output_difference(base, first):
            return Outcome(False, f"cache on vs off: {difference}")
        second = subject.process(case, cache=cache)
        if difference := output_difference(first, second):
            return Outcome(False, f"second identical request (cached) vs first: {difference}")
        hits = cache.make_stats().hits
        if case.media and hits == 0:
            return Outcome(False, "a second identical request did not hit the processor cache")
    modality = case.modality
    for index in range(len(case.media)):
        alone = ctx.subject_output(case.single(index))
        batch_hash = base.item_hashes.get(modality, ())[index:index + 1]
        alone_hash = alone.item_hashes.get(modality, ())[:1]
        if batch_hash != alone_hash:
            return Outcome(False, f"{modality} item {index}: hash {batch_hash} in the batch but "
                                  f"{alone_hash} alone: the hash depends on its neighbours")
        if difference := value_difference(alone.item_fields.get(modality, [{}])[0],
                                          base.item_fields.get(modality, [])[index],
                                          f"{modality} item {index} alone vs in batch"):
            return Outcome(False, difference)
    if len(case.media) > 1:
        flipped = ctx.subject_output(case.with_media(tuple(reversed(case.media))))
        count = len(case.media)
        for index in range(count):
            mirror = count - 1 - index
            if difference := value_difference(
                base.item_fields.get(modality, [])[index],
                flipped.item_fields.get(modality, [])[mirror],
                f"{modality} item {index} vs the same item at {mirror} in reversed order",
            ):
                return Outcome(False, difference)
            if base.item_hashes.get(modality, ())[index:index + 1] != \
                    flipped.item_hashes.get(modality, ())[mirror:mirror + 1]:
                return Outcome(False, f"{modality} item {index}: hash changes when the order "
                                      "of items is reversed")
    return PASS


CHECK = Check(
    id="cache",
    statement="Outputs are independent of the cache, of neighbours and order, and of prompt "
              "form.",
    hint="an item's processed data depends on its neighbours or on the prompt form: batch "
         "padding that image_sizes does not describe, or a hash that is not per item",
    level="case", run=run,
    proof=Proof("hash-neighbours", "llava", "depends on its neighbours"),
)
