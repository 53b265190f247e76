"""What the model checks feed the models, and how items are embedded the way vLLM batches them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from conformance.checks.model.loading import VllmModel, ensure_distributed, native_limit
from conformance.core.vllms import current_label, impl_profile
from conformance.inputs.media import SAMPLING_RATE, Media, audio_rate, make_items, mm_data
from conformance.subjects import vllm
from fixtures.recipe import Recipe

ITEMS_PER_PROMPT = 2
# One aspect ratio, the second item three times the first in every dimension (a sound, 2.3x as
# long), so each item's processed size contains the one before it (pixtral: 32x32 then 48x64
# px; mistral3: 28x56 then 84x112). Measured token counts differ on pixtral (4, 12), mistral3
# (2, 12), the Qwen-VLs (1, 2), llava-onevision (14, 39), internvl (4, 12); idefics3, smolvlm,
# llava-next and glm4v tile or resize both alike, the fixed-size towers give equal counts.
NESTED_IMAGE_SIZES = ((20, 30), (60, 90))  # (h, w)
NESTED_AUDIO_SECONDS = (0.6, 1.4)


def item_limit(recipe: Recipe, path: str, modality: str) -> int | None:
    """Items of `modality` a prompt may hold: native vLLM's limit where vLLM has a native
    model, else the recipe's (None: no limit)."""
    if recipe.native_in_vllm:
        return native_limit(recipe, path, modality)
    return recipe.max_items


def two_item_inputs(recipe: Recipe, path: str) -> tuple[str, str, list]:
    """The recipe's prompt with two items (one where only one is taken)."""
    modality = recipe.modalities[0]
    limit = item_limit(recipe, path, modality)
    count = ITEMS_PER_PROMPT if limit is None else min(ITEMS_PER_PROMPT, limit)
    items = make_items(modality, count, audio_rate(recipe, path))
    return modality, recipe.render_prompt(modality, count), items


def nested_inputs(recipe: Recipe, path: str) -> tuple[str, str, list] | None:
    """The recipe's prompt with two items of one shape, the smaller first (None where native
    vLLM takes one item per prompt). The recipe's items differ in aspect ratio, so an item
    encoded with its neighbour's sizes (`image_sizes`, a mask) makes the tower raise; here the
    neighbour's sizes fit inside the item, so the same mix-up yields embeddings to compare."""
    media = nested_media(recipe, path)
    if media is None:
        return None
    modality = media[0].modality
    return modality, recipe.render_prompt(modality, len(media)), [m.materialise() for m in media]


def nested_media(recipe: Recipe, path: str) -> tuple[Media, ...] | None:
    """The specs of `nested_inputs`' items (a standalone reproducer rebuilds them)."""
    modality = recipe.modalities[0]
    limit = item_limit(recipe, path, modality)
    if limit is not None and limit < 2:
        return None
    if modality == "image":
        return tuple(Media("image", height=h, width=w, seed=i)
                     for i, (h, w) in enumerate(NESTED_IMAGE_SIZES))
    rate = audio_rate(recipe, path)
    return tuple(Media("audio", samples=int(s * rate), seed=i, rate=rate)
                 for i, s in enumerate(NESTED_AUDIO_SECONDS))


def process(loaded: VllmModel, prompt: str, modality: str, items: list,
            rate: int = SAMPLING_RATE) -> Any:
    """vLLM's processed inputs (prompt ids, placeholders, per-item fields) for one prompt
    (audio at `rate` Hz)."""
    return vllm.apply(loaded.processor, prompt, mm_data(modality, items, rate))


def items_in_prompt_order(out: Any) -> list[tuple[str, int, Any]]:
    """(modality, index, item) sorted by placeholder offset, as the engine schedules them."""
    from vllm.multimodal.utils import argsort_mm_positions

    return [(m, i, out["mm_kwargs"][m][i]) for m, i in argsort_mm_positions(out["mm_placeholders"])]


def embed(out: Any, device: str, run: Callable[..., Sequence[Any]]) -> dict[str, list]:
    """Per modality, one embedding per item: the items batched the way vLLM's model runner
    batches them (`group_and_batch_mm_kwargs`), each batch through `run`, output split."""
    import torch
    from vllm.multimodal.utils import group_and_batch_mm_kwargs

    ordered = items_in_prompt_order(out)
    outputs: list = []
    with torch.inference_mode():
        for modality, count, batch in group_and_batch_mm_kwargs(
                [(m, item) for m, _, item in ordered], device=device):
            got = list(run(**batch))
            if len(got) != count:
                shapes = [tuple(e.shape) for e in got]
                raise ValueError(f"a batch of {count} {modality} item(s) gave {len(got)} "
                                 f"embedding(s), of shapes {shapes}")
            outputs.extend(got)
    per_modality: dict[str, list] = {}
    for (modality, _, _), embedding in zip(ordered, outputs, strict=True):
        per_modality.setdefault(modality, []).append(embedding)
    return per_modality


def vllm_embed(loaded: VllmModel, out: Any, device: str) -> dict[str, list]:
    from vllm.config import set_current_vllm_config

    with set_current_vllm_config(loaded.vllm_config):
        ensure_distributed()  # a collected engine may have torn it down
        return embed(out, device, loaded.model.embed_multimodal)


def impl_embed(model: Any, out: Any, device: str) -> dict[str, list]:
    # lazy: impl.encoder imports transformers (+0.8 s over what the check registry loads)
    import impl.encoder

    profile = impl_profile(current_label())  # the model checks compare impl only where one is
    return embed(out, device, lambda **kwargs: impl.encoder.embed_multimodal(
        model, profile=profile, **kwargs))


def error_text(error: Exception) -> str:
    """The error's type and message; a bare `assert` (no message) names the statement that
    raised it instead, so that evidence can tell one bare assertion from another."""
    import traceback

    if str(error) or error.__traceback__ is None:
        return f"{type(error).__name__}: {error}"
    frame = traceback.extract_tb(error.__traceback__)[-1]
    return f"{type(error).__name__}: (raised by `{frame.line}` in {frame.filename.split('/')[-1]})"


def summary(problems: Sequence[str], limit: int = 6) -> str | None:
    """The evidence: the first problems verbatim (data holds every measurement)."""
    if not problems:
        return None
    more = f"; and {len(problems) - limit} more" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more
