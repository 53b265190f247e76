"""dummy-data: the backend profiles memory with native vLLM's dummy items, and honours the
dummy options a deployment gives.

vLLM profiles memory with one dummy item per modality (`get_dummy_mm_inputs({modality: 1})`),
built by the model's dummy-inputs builder: its largest item, unless the deployment caps it with
dummy options (`limit_mm_per_prompt={"image": {"count": 1, "width": 64, "height": 64}}`). A
dummy item with fewer embeddings than native's profiles less memory than serving the same
checkpoint takes; options the backend drops profile a maximal item where the user asked for a
small one; a dummy input the backend cannot process stops the engine at start.

For the recipe's first modality, without options and with options that bind on both sides (half
the smaller side's largest item; a quarter of its height, so a swapped width and height shows):
the number of dummy items and each one's embeddings once processed, against native vLLM's; the
items' sizes with options only. Without options each side picks its own largest item (the
backend a 10000x10000 image, by design): what profiling reserves is their embeddings. Where vLLM
has no model of its own, the options are the oracle: vLLM's builder takes an option below the
model's largest item as it is, and one item is asked for.
"""

from __future__ import annotations

from typing import Any

from conformance.checks.contract import Check, Outcome, Proof
from conformance.checks.differences import error_text
from conformance.subjects import vllm
from conformance.subjects.vllm_dummy import DummyItems, dummy_items
from fixtures.recipe import Recipe


def shown(modality: str, size: tuple[int, ...]) -> str:
    return "x".join(map(str, size)) if modality == "image" else f"{size[0]} samples"


def binding(modality: str, largest: list[tuple[int, ...]]) -> dict[str, int]:
    """Options below every side's largest item, so that each side's builder takes them as
    they are (vLLM keeps the smaller of the option and the model's own size)."""
    least = [min(size[i] for size in largest) for i in range(len(largest[0]))]
    if modality == "audio":
        return {"length": max(1, least[0] // 2)}
    return {"width": max(1, least[0] // 2), "height": max(1, least[1] // 4)}


def fields(modality: str, items: DummyItems, sized: bool) -> dict[str, object]:
    """What is compared of one side's dummy items, by the evidence's wording: their number
    built and placed, each one's size where options bind it, and each one's embeddings."""
    found: dict[str, object] = {"s built": len(items.sizes), "s placed": len(items.embeds)}
    if sized:
        found |= {f" {i}": shown(modality, s) for i, s in enumerate(items.sizes)}
    return found | {f" {i} embeddings": n for i, n in enumerate(items.embeds)}


def by_options(modality: str, options: dict[str, int] | None) -> dict[str, object]:
    """Without native vLLM: the one item asked for, as large as the options (vLLM's builder
    takes an option below the model's largest item as it is)."""
    size = {" 0": shown(modality, tuple(options.values()))} if options else {}
    return {"s built": 1, "s placed": 1, **size}


def compare(modality: str, where: str, mine: DummyItems | Exception,
            native: DummyItems | None, options: dict[str, int] | None) -> list[str]:
    if isinstance(mine, Exception):
        return [f"backend cannot build or process its own dummy {modality} ({where}): "
                f"{error_text(mine)}"]
    name, want = ("native", fields(modality, native, bool(options))) if native else \
        ("options", by_options(modality, options))
    got = fields(modality, mine, bool(options))
    return [f"dummy {modality}{key}: backend {got[key]} vs {name} {want[key]} {where}"
            for key in want if key in got and got[key] != want[key]]


def sides(recipe: Recipe, path: str, modality: str, options: dict[str, int] | None
          ) -> tuple[DummyItems | None, DummyItems | Exception]:
    """Native vLLM's dummy items (None without a native model; its failure is the cell's
    error: the oracle failed) and the backend's, or what building or processing them raised."""
    native = dummy_items(path, vllm.NATIVE, modality, options) \
        if recipe.native_in_vllm else None
    try:
        return native, dummy_items(path, vllm.BACKEND, modality, options)
    except Exception as error:  # an engine that would not start: evidence, not an error
        return native, error


def run(recipe: Recipe, path: str, **_: Any) -> Outcome:
    modality = recipe.modalities[0]
    passes = [(None, sides(recipe, path, modality, None))]
    if largest := [got.sizes[0] for got in passes[0][1]
                   if isinstance(got, DummyItems) and got.sizes]:
        options = binding(modality, largest)
        passes.append((options, sides(recipe, path, modality, options)))
    differences, data = [], {}
    for options, (native, mine) in passes:
        where = "with options " + ",".join(f"{k}={v}" for k, v in options.items()) \
            if options else "without options"
        differences += compare(modality, where, mine, native, options)
        data[where] = {side: f"{[shown(modality, s) for s in got.sizes]} embeds {got.embeds}"
                       for side, got in (("native", native), ("backend", mine))
                       if isinstance(got, DummyItems)}
    outcome = Outcome.judged(differences, set())  # each difference judged on its own
    outcome.measured = data
    return outcome


CHECK = Check(
    id="dummy-data",
    statement="The backend's dummy items for memory profiling (count, embeddings; sizes under "
              "dummy options) equal native vLLM's, with and without dummy options, and it "
              "processes them.",
    hint="look at MultiModalDummyInputsBuilder.get_dummy_mm_data (mm_options, "
         "get_image_size_with_most_features) and get_dummy_text",
    level="checkpoint", run=run,
    compared_with="native vLLM's dummy items, else the dummy options",
    matrix_fault="backend-dummy-options-dropped",
    proof=Proof("backend-dummy-options-dropped", "llava",
                "dummy image 0: backend 10000x10000 vs native 14x7 with options"),
)
