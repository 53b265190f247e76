"""profiling: the backend's encoder budget per item covers every item it serves and is native's,
and it takes as many items per prompt as native vLLM.

vLLM sizes its encoder cache and profiles memory from `get_mm_max_tokens_per_item` (the most
embeddings one item of a modality can have). An item with more embeddings than that budget
overflows what was reserved when it is served; a budget unlike native vLLM's reserves another
amount of memory for the same checkpoint. The probes are the largest items the suites draw.
The items a prompt may hold (`get_supported_mm_limits`) bound what vLLM accepts and profiles:
a backend limit unlike native's accepts requests native refuses, or refuses what it serves.
"""

from __future__ import annotations

from typing import Any

from conformance.checks.contract import Check, Outcome, Proof
from conformance.core.subjects import VLLM_BACKEND
from conformance.inputs.cases import Case
from conformance.inputs.media import Media, audio_rate
from conformance.subjects import vllm
from fixtures.recipe import Recipe


def probes(modality: str, rate: int) -> tuple[Media, ...]:
    """The largest items the suites draw: the biggest square and both extreme aspects; the
    longest audio (at `rate` Hz)."""
    # imported here: the strategies module loads the hypothesis profile when imported
    from conformance.inputs.strategies import IMAGE_SIDES, MAX_ASPECT, audio_samples

    if modality == "audio":
        return (Media("audio", samples=audio_samples(rate)[1], seed=0, rate=rate),)
    side, thin = IMAGE_SIDES[1], int(IMAGE_SIDES[1] / MAX_ASPECT) + 1
    return tuple(Media("image", height=h, width=w, seed=i)
                 for i, (h, w) in enumerate(((side, side), (side, thin), (thin, side))))


def budget(path: str, impl: str, modality: str) -> int | None:
    """What vLLM's encoder budget reads (`get_mm_max_toks_per_item`): the processor's max
    tokens per item, or, where it reports none, the embeddings of its dummy inputs."""
    from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item

    processor = vllm.create_processor(path, impl, {modality: 1})
    return get_mm_max_toks_per_item(processor, {modality: 1}, cache=None).get(modality)


def observed(recipe: Recipe, path: str, modality: str) -> dict[str, int]:
    """Embeddings of each probe, each alone in a prompt, as the backend places them."""
    subject = vllm.BackendSubject(path, recipe)
    out: dict[str, int] = {}
    for media in probes(modality, audio_rate(recipe, path)):
        case = Case(recipe.name, modality, ("", ""), (media,))
        placed = subject.process(case).placeholders.get(modality, ())
        out[media.describe()] = sum(len(p.embed_positions) for p in placed)
    return out


def run(recipe: Recipe, path: str, **_: Any) -> Outcome:
    differences: list[str] = []
    data: dict[str, Any] = {}
    for modality in recipe.modalities:
        mine = budget(path, vllm.BACKEND, modality)
        data[f"{modality}_backend_budget"] = mine
        if recipe.placeholder.get(modality):  # an item must be placeable to be measured
            sizes = observed(recipe, path, modality)
            data[f"{modality}_observed"] = sizes
            over = {what: n for what, n in sizes.items() if mine is not None and n > mine}
            if over:
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
    outcome = Outcome.judged(differences, set())  # each difference judged on its own
    outcome.measured = data
    return outcome


CHECK = Check(
    id="profiling",
    statement="The backend's encoder budget per item (get_mm_max_tokens_per_item) covers the "
              "largest items served and equals native vLLM's; so do its items per prompt.",
    hint="look at get_max_image_tokens / get_max_audio_tokens and the processor's token count "
         "for the largest image size",
    level="checkpoint", run=run,
    compared_with="the largest items served; native vLLM's budget",
    proof=Proof("backend-budget-one-short", "llava", "more embeddings than the budget"),
    matrix_fault="backend-budget-one-short",
    more_proofs=(Proof("backend-one-item", "llava", "image: items per prompt: native None vs "
                       "backend 1", subject=VLLM_BACKEND),),
)
