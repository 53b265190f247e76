"""profiling: the backend's encoder budget per item covers every item it serves and is native's,
and it takes as many items per prompt as native vLLM.

vLLM sizes its encoder cache and profiles memory from `get_mm_max_tokens_per_item` (the most
embeddings one item of a modality can have). An item with more embeddings than that budget
overflows what was reserved when it is served; a budget unlike native vLLM's reserves another
amount of memory for the same checkpoint. The probes are the largest items the suites draw.
The items a prompt may hold (`get_supported_mm_limits`) bound what vLLM accepts and profiles:
a backend limit unlike native's accepts requests native refuses, or refuses what it serves.
Under each option set of the recipe the same holds in every form a deployment profiles with
(`option forms`: model-level flat, scoped, on disk; a request's own options come after the
budget was sized): the deployment's budget must cover its items and equal native's.
"""

from __future__ import annotations

from typing import Any

from conformance.checks.contract import Check, Outcome, Proof
from conformance.checks.differences import error_text
from conformance.checks.option_forms import FORMS
from conformance.core.subjects import VLLM_BACKEND
from conformance.inputs.cases import Case
from conformance.inputs.forms import (
    DISK,
    MODEL_FLAT,
    MODEL_SCOPED,
    NATIVE_SCOPED_UNRELIABLE,
    describe,
    form_inputs,
    frozen_options,
)
from conformance.inputs.media import Media, audio_rate
from conformance.inputs.strategies import IMAGE_SIDES, MAX_ASPECT, audio_samples
from conformance.subjects import vllm
from conformance.subjects.context import in_form
from conformance.subjects.isolation import processor_defaults_fresh
from fixtures.recipe import Recipe


def probes(modality: str, rate: int) -> tuple[Media, ...]:
    """The largest items the suites draw: the biggest square and both extreme aspects; the
    longest audio (at `rate` Hz)."""
    if modality == "audio":
        return (Media("audio", samples=audio_samples(rate)[1], seed=0, rate=rate),)
    side, thin = IMAGE_SIDES[1], int(IMAGE_SIDES[1] / MAX_ASPECT) + 1
    return tuple(Media("image", height=h, width=w, seed=i)
                 for i, (h, w) in enumerate(((side, side), (side, thin), (thin, side))))


# The forms a deployment sizes its budget with: a request's own options (flat or scoped) reach
# its processing only, after vLLM profiled with the deployment's
BUDGET_FORMS = (MODEL_FLAT, MODEL_SCOPED, DISK)


def budget(path: str, impl: str, modality: str, options: vllm.Options = ()) -> int | None:
    """What vLLM's encoder budget reads (`get_mm_max_toks_per_item`): the processor's max
    tokens per item, or, where it reports none, the embeddings of its dummy inputs; `options`:
    the deployment's model-level processor options."""
    from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item

    # a fresh deployment: count helpers write the options they see into their class defaults
    with processor_defaults_fresh():
        processor = vllm.create_processor(path, impl, {modality: 1}, options=options)
        return get_mm_max_toks_per_item(processor, {modality: 1}, cache=None).get(modality)


def observed(recipe: Recipe, path: str, modality: str, options: vllm.Options = (),
             form: str = "") -> dict[str, int]:
    """Embeddings of each probe, each alone in a prompt, as the backend places them (under
    `options` in `form`)."""
    subject = vllm.BackendSubject(path, recipe)
    out: dict[str, int] = {}
    for media in probes(modality, audio_rate(recipe, path)):
        case = Case(recipe.name, modality, ("", ""), (media,), options, option_form=form)
        placed = in_form(subject, case).placeholders.get(modality, ())
        out[media.describe()] = sum(len(p.embed_positions) for p in placed)
    return out


def over_budget(sizes: dict[str, int], limit: int | None) -> dict[str, int]:
    return {what: n for what, n in sizes.items() if limit is not None and n > limit}


def form_differences(recipe: Recipe, path: str, modality: str
                     ) -> tuple[list[str], dict, dict[str, vllm.Options]]:
    """Each option set of the recipe in each form a deployment profiles with: the backend's
    budget against the items it then serves and against native vLLM's budget in the same
    form (a form native rejects, or whose handling by native is unreliable, is not compared;
    the backend raising is a difference). Also each difference's options (the judge matches
    a finding bound to options against them)."""
    found: list[str] = []
    data: dict[str, dict] = {}
    options_of: dict[str, vllm.Options] = {}
    unreliable = recipe.name.partition("~")[0] in NATIVE_SCOPED_UNRELIABLE
    for options in map(frozen_options, recipe.processor_options):
        for form in BUDGET_FORMS:
            inputs = form_inputs(form, options, modality, path)
            folder, where = inputs.path or path, f"{modality} {describe(form, options, modality)}"
            seen: dict[str, Any] = data.setdefault(where, {})
            mine: int | None = None
            for party, impl in (("native", vllm.NATIVE), ("backend", vllm.BACKEND)):
                if party == "native" and (not recipe.native_in_vllm or
                                          (unreliable and form == MODEL_SCOPED)):
                    continue
                try:
                    seen[party] = budget(folder, impl, modality, inputs.model)
                except Exception as error:
                    seen[party] = f"raised: {error_text(error)}"
            here: list[str] = []
            if isinstance(seen["backend"], str):
                here.append(f"{where}: the backend's budget {seen['backend']}")
            else:
                mine = seen["backend"]
            native = seen.get("native")
            if mine is not None and isinstance(native, int) and native != mine:
                here.append(f"{where}: budget per item: native {native} vs backend {mine}")
            try:
                seen["observed"] = sizes = observed(recipe, path, modality, options, form)
            except Exception as error:
                here.append(f"{where}: the backend raised: {error_text(error)}")
            else:
                if over := over_budget(sizes, mine):
                    here.append(f"{where}: an item has more embeddings than the budget of "
                                f"{mine}: {over}")
            found += here
            options_of.update(dict.fromkeys(here, options))
    return found, data, options_of


def run(recipe: Recipe, path: str, **_: Any) -> Outcome:
    differences: list[str] = []
    data: dict[str, Any] = {}
    options_of: dict[str, vllm.Options] = {}
    for modality in recipe.modalities:
        mine = budget(path, vllm.BACKEND, modality)
        data[f"{modality}_backend_budget"] = mine
        if recipe.placeholder.get(modality):  # an item must be placeable to be measured
            sizes = observed(recipe, path, modality)
            data[f"{modality}_observed"] = sizes
            if over := over_budget(sizes, mine):
                differences.append(f"{modality}: an item has more embeddings than the budget "
                                   f"of {mine}: {over}")
        if recipe.native_in_vllm:
            limits = {impl: vllm.create_processor(path, impl, {modality: 1}).info
                      .get_supported_mm_limits().get(modality, 0) for impl in vllm.IMPLS}
            data[f"{modality}_limits"] = limits
            if limits[vllm.NATIVE] != limits[vllm.BACKEND]:
                differences.append(f"{modality}: items per prompt: native "
                                   f"{limits[vllm.NATIVE]} vs backend {limits[vllm.BACKEND]} "
                                   "(None: no limit)")
            native = budget(path, vllm.NATIVE, modality)
            data[f"{modality}_native_budget"] = native
            if native != mine:
                differences.append(f"{modality}: budget per item: native {native} vs backend "
                                   f"{mine}")
        if recipe.processor_options and recipe.placeholder.get(modality):
            found, data[f"{modality}_{FORMS}"], options = form_differences(recipe, path,
                                                                           modality)
            differences += found
            options_of.update(options)
    outcome = Outcome.judged(differences, set())  # each difference judged on its own
    outcome.measured = data
    outcome.options = options_of
    return outcome


CHECK = Check(
    id="profiling",
    statement="The backend's encoder budget per item (get_mm_max_tokens_per_item) covers the "
              "largest items served and equals native vLLM's, with the architecture's processor "
              "options in each form a deployment profiles with (model-level flat, scoped, on "
              "disk) too; so do its items per prompt.",
    hint="look at get_max_image_tokens / get_max_audio_tokens and the processor's token count "
         "for the largest image size",
    level="checkpoint", run=run,
    compared_with="the largest items served; native vLLM's budget (both per option form)",
    proof=Proof("backend-budget-one-short", "llava", "more embeddings than the budget"),
    matrix_fault="backend-budget-one-short",
    more_proofs=(Proof("backend-one-item", "llava", "image: items per prompt: native None vs "
                       "backend 1", subject=VLLM_BACKEND),
                 # Idefics3 counts structure tokens below 5.25 (a known finding: 7 vs 4 with
                 # the option); without the option its budget is the default's 33
                 Proof("backend-budget-options-ignored", "idefics3",
                       "{'do_image_splitting': False}): budget per item: native 4 vs backend 33",
                       subject=VLLM_BACKEND),),
)
