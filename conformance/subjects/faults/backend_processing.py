"""Faults in vLLM's Transformers backend's processing, patched in this process only (its
processor classes, its processing info, the processor cache's keys and items; never the
installed files): each a bug the processing-level checks must catch."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any
from unittest import mock


def backend_processor_classes(multimodal: Any) -> list[type]:
    """The backend's processor classes, each once: vLLM 0.31.0 has a Legacy and an Offsets one
    (`MultiModalProcessor` names one of them), 0.32.0 merged them into `MultiModalProcessor`."""
    names = ("LegacyMultiModalProcessor", "OffsetsMultiModalProcessor", "MultiModalProcessor")
    found = [getattr(multimodal, name) for name in names if hasattr(multimodal, name)]
    return list(dict.fromkeys(found))


def _around_apply(around: Callable[..., Any]) -> list[Any]:
    """Patches of each backend processor's `apply` (Legacy and Offsets in 0.31.0), calling
    `around(processor, original_apply, inputs, *args, **kwargs)` instead."""
    from vllm.model_executor.models.transformers import multimodal

    patches = []
    for cls in backend_processor_classes(multimodal):
        def apply(self: Any, *args: Any, _original: Any = cls.apply, **kwargs: Any) -> Any:
            return around(self, _original, *args, **kwargs)

        patches.append(mock.patch.object(cls, "apply", apply))
    return patches


def _rewrap_apply(change: Callable[[Any, Any], Any]) -> list[Any]:
    """Patches of the backend processors' `apply`, handing `change` the processor and each
    output (it rebinds the output's entries: cached items are shared with the processor
    cache, never mutated)."""
    return _around_apply(lambda self, original, *args, **kwargs:
                         change(self, original(self, *args, **kwargs)))


def offset_shift() -> list[Any]:
    """vLLM's backend processor places each request's last item one token late."""

    def shifted(_processor: Any, out: Any) -> Any:
        for modality, ranges in list(out["mm_placeholders"].items()):
            if ranges:
                last = dataclasses.replace(ranges[-1], offset=ranges[-1].offset + 1)
                out["mm_placeholders"][modality] = [*ranges[:-1], last]
        return out

    return _rewrap_apply(shifted)


def request_options_ignored() -> list[Any]:
    """vLLM's backend processor drops each request's own processor options (its
    `mm_processor_kwargs`, reaching the processor as `hf_processor_mm_kwargs`): the request is
    processed, and its items keyed in the processor cache, as if it gave none."""
    return _around_apply(lambda self, original, inputs, *args, **kwargs: original(
        self, dataclasses.replace(inputs, hf_processor_mm_kwargs={}), *args, **kwargs))


SCOPED_GROUPS = ("images_kwargs", "audio_kwargs", "videos_kwargs")  # transformers' groups


def _unscoped(options: Any) -> dict[str, Any]:
    return {k: v for k, v in dict(options).items() if k not in SCOPED_GROUPS}


def scoped_options_ignored() -> list[Any]:
    """vLLM's backend drops processor options scoped by modality (`{"images_kwargs": {...}}`),
    model-level and per request alike: its processor, its calls and its counts see the flat
    options alone."""

    def around(self: Any, original: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        ctx = self.info.ctx
        merged = type(ctx).get_merged_mm_kwargs

        def without(owner: Any, given: Any, **options: Any) -> dict[str, Any]:
            if owner is not ctx:  # another processor's context (frozen: patched on its class)
                return merged(owner, given, **options)
            return _unscoped(merged(owner, _unscoped(given), **options))

        with mock.patch.object(type(ctx), "get_merged_mm_kwargs", without):
            return original(self, dataclasses.replace(
                inputs, hf_processor_mm_kwargs=_unscoped(inputs.hf_processor_mm_kwargs)),
                *args, **kwargs)

    return _around_apply(around)


def disk_options_ignored() -> list[Any]:
    """vLLM's backend builds its HF processor from the files the checkpoint was made from, not
    from the folder it serves (a processor config read from elsewhere): options a copy of the
    checkpoint writes into its own processor config never reach it. The harness's disk form
    is such a copy (`conformance.inputs.forms.disk_folder`: every other file a link to the
    original), so the original is the folder its `config.json` links to; the processor is
    made from it as vLLM makes one (`cached_processor_from_config`'s own steps)."""
    from pathlib import Path

    from vllm.multimodal.processing import context as processing_context
    from vllm.transformers_utils import processor as processors

    made = processing_context.cached_processor_from_config

    def around(self: Any, original: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        config = self.info.ctx.model_config
        folder = Path(config.model)
        source = (folder / "config.json").resolve().parent
        if source == folder.resolve():
            return original(self, inputs, *args, **kwargs)

        def from_source(model_config: Any, processor_cls: Any = processors.ProcessorMixin,
                        **options: Any) -> Any:
            if model_config is not config:  # another processor's (native vLLM's)
                return made(model_config, processor_cls, **options)
            return processors.cached_get_processor_without_dynamic_kwargs(
                str(source), revision=model_config.revision,
                trust_remote_code=model_config.trust_remote_code, processor_cls=processor_cls,
                **processors._merge_mm_kwargs(model_config, processor_cls, **options))

        with mock.patch.object(processing_context, "cached_processor_from_config", from_source):
            return original(self, inputs, *args, **kwargs)

    return _around_apply(around)


def cache_key_without_options() -> list[Any]:
    """vLLM's backend keys its items in the processor cache without the request's own
    processor options: a request giving options hits the entries its items made without
    them."""
    from vllm.multimodal.processing.inputs import ProcessorInputs

    original_hashes = ProcessorInputs.get_mm_hashes

    def around(self: Any, original: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        def hashes(given: Any, *hash_args: Any, **hash_kwargs: Any) -> Any:
            return original_hashes(dataclasses.replace(given, hf_processor_mm_kwargs={}),
                                   *hash_args, **hash_kwargs)

        with mock.patch.object(ProcessorInputs, "get_mm_hashes", hashes):
            return original(self, inputs, *args, **kwargs)

    return _around_apply(around)


def rows_per_token() -> list[Any]:
    """vLLM's backend counts a grid image's rows after the 2x2 merge (tokens, not patches)."""
    from vllm.model_executor.models.transformers import multimodal

    patches = []
    for cls in backend_processor_classes(multimodal):
        if (original := cls.__dict__.get("_get_num_image_patches")) is None:
            continue

        def rows(self: Any, hf_inputs: Any, mm_data: Any, num_images: int,
                 _original: Any = original) -> Any:
            if (grid := hf_inputs.get("image_grid_thw")) is None:
                return _original(self, hf_inputs, mm_data, num_images)
            return grid.prod(-1) // 4

        patches.append(mock.patch.object(cls, "_get_num_image_patches", rows))
    return patches


def fields_one_modality() -> list[Any]:
    """vLLM's backend gives every processor output to the first modality of a prompt (its
    single-modality shortcut taken for a mixed prompt too)."""
    from vllm.model_executor.models.transformers import multimodal

    def partition(self: Any, keys: list[str], modalities: list[str]) -> dict:
        return {modality: list(keys) if i == 0 else [] for i, modality in enumerate(modalities)}

    # defined once for both processors (0.31.0: on their private base class)
    owners = {next(c for c in cls.__mro__ if "_partition_keys_by_modality" in c.__dict__)
              for cls in backend_processor_classes(multimodal)}
    return [mock.patch.object(owner, "_partition_keys_by_modality", partition)
            for owner in owners]


def budget_one_short() -> list[Any]:
    """vLLM's backend reports one embedding fewer per item than its largest item has (an
    off-by-one; halving would coincide with a known over-count: Qwen2-Audio's 1500 vs 750)."""
    from vllm.model_executor.models.transformers import multimodal

    info = multimodal.MultiModalProcessingInfo
    original = info.get_mm_max_tokens_per_item

    def short(self: Any, *args: Any, **kwargs: Any) -> Any:
        found = original(self, *args, **kwargs)
        return {modality: n - 1 for modality, n in found.items()}

    return [mock.patch.object(info, "get_mm_max_tokens_per_item", short)]


def budget_options_ignored() -> list[Any]:
    """vLLM's backend sizes its image budget without the deployment's processor options
    (`LLM(mm_processor_kwargs=...)`): the checkpoint's defaults alone."""
    from vllm.model_executor.models.transformers import multimodal

    info = multimodal.MultiModalProcessingInfo
    original = info.get_max_image_tokens

    def without_options(self: Any) -> int:
        config = self.ctx.model_config.get_multimodal_config()
        with mock.patch.object(config, "mm_processor_kwargs", None):
            return original(self)

    return [mock.patch.object(info, "get_max_image_tokens", without_options)]


def dummy_options_dropped() -> list[Any]:
    """vLLM's backend builds its dummy items without the deployment's dummy options
    (`limit_mm_per_prompt={"image": {"width": 64, ...}}`): it profiles its largest item."""
    from vllm.config.multimodal import MultiModalDummyOptions
    from vllm.model_executor.models.transformers import multimodal

    builder = multimodal.MultiModalDummyInputsBuilder
    original = builder.get_dummy_mm_data

    def dropped(self: Any, seq_len: int, mm_counts: Any, mm_options: Any) -> Any:
        return original(self, seq_len, mm_counts, MultiModalDummyOptions())

    return [mock.patch.object(builder, "get_dummy_mm_data", dropped)]


def one_item() -> list[Any]:
    """vLLM's backend takes one item of each modality per prompt."""
    from vllm.model_executor.models.transformers import multimodal

    info = multimodal.MultiModalProcessingInfo
    original = info.get_supported_mm_limits

    def one(self: Any) -> Any:
        return dict.fromkeys(original(self), 1)

    return [mock.patch.object(info, "get_supported_mm_limits", one)]


def bos_doubled() -> list[Any]:
    """vLLM's backend hands over its prompt with the first token twice (BOS added again to a
    prompt that holds it), every placeholder moved along with it: the ids alone are wrong."""

    def doubled(_processor: Any, out: Any) -> Any:
        ids = list(out["prompt_token_ids"])
        out["prompt_token_ids"] = ids[:1] + ids
        out["mm_placeholders"] = {
            modality: [dataclasses.replace(r, offset=r.offset + 1) for r in ranges]
            for modality, ranges in out["mm_placeholders"].items()}
        return out

    return _rewrap_apply(doubled)


def embed_dropped() -> list[Any]:
    """vLLM's backend leaves one of each item's embedding tokens unmarked (the middle one of
    the positions holding the replacement's most frequent marked id, its embedding token): the
    encoder's rows no longer fit the positions."""
    import torch

    def dropped(_processor: Any, out: Any) -> Any:
        ids = torch.tensor(list(out["prompt_token_ids"]))

        def one_fewer(r: Any) -> Any:
            mask = (torch.ones(r.length, dtype=torch.bool) if r.is_embed is None
                    else r.is_embed.clone())
            held = ids[r.offset:r.offset + r.length]
            if mask.any():
                token = held[mask].mode().values
                marked = torch.nonzero(mask & held.eq(token)).flatten()
                mask[int(marked[len(marked) // 2])] = False
            return dataclasses.replace(r, is_embed=mask)

        out["mm_placeholders"] = {modality: [one_fewer(r) for r in ranges]
                                  for modality, ranges in out["mm_placeholders"].items()}
        return out

    return _rewrap_apply(dropped)


def hash_per_request() -> list[Any]:
    """vLLM's backend keys each item by its data and something of the request (an object's
    id, a counter): the same item in two identical requests gets two cache keys."""
    import itertools

    requests = itertools.count()

    def keyed(_processor: Any, out: Any) -> Any:
        salt = next(requests)
        out["mm_hashes"] = {modality: [f"{h}-{salt}" for h in hashes]
                            for modality, hashes in (out.get("mm_hashes") or {}).items()}
        return out

    return _rewrap_apply(keyed)


def field_entry_dropped() -> list[Any]:
    """vLLM's backend hands each item its data one entry short (an off-by-one in a slice):
    the first floating-point field of every item loses its last entry along its last
    dimension (the leading one is often a batch of 1)."""
    from vllm.multimodal.inputs import MultiModalKwargsItem, MultiModalKwargsItems

    def cuttable(data: Any) -> bool:
        return getattr(data, "is_floating_point", lambda: False)() and data.dim() >= 1 \
            and data.shape[-1] >= 2

    def shorter(item: Any) -> Any:
        key = next((k for k, elem in (item or {}).items() if cuttable(elem.data)), None)
        if key is None:
            return item
        elem = item[key]
        return MultiModalKwargsItem({**item, key: dataclasses.replace(elem,
                                                                      data=elem.data[..., :-1])})

    def short(_processor: Any, out: Any) -> Any:
        out["mm_kwargs"] = MultiModalKwargsItems(
            {modality: [shorter(item) for item in items]
             for modality, items in out["mm_kwargs"].items()})
        return out

    return _rewrap_apply(short)


def cache_stale_fields() -> list[Any]:
    """vLLM's processor cache serves the backend's items without their last field (stored
    before the backend completed them): a request that hits the cache gets other data than
    one that does not."""
    from vllm.multimodal.cache import MultiModalProcessorOnlyCache
    from vllm.multimodal.inputs import MultiModalKwargsItem

    original = MultiModalProcessorOnlyCache.get_and_update_item
    inside: list[bool] = []  # the backend's processor is running (native's cache is not hit)

    def served(self: Any, mm_item: Any, mm_hash: str) -> Any:
        hit = mm_hash in self._cache
        item, updates = original(self, mm_item, mm_hash)
        if inside and hit and item is not None and len(item) > 1:
            item = MultiModalKwargsItem({k: v for k, v in list(item.items())[:-1]})
        return item, updates

    def marked(self: Any, original: Any, *args: Any, **kwargs: Any) -> Any:
        inside.append(True)
        try:
            return original(self, *args, **kwargs)
        finally:
            inside.pop()

    return [mock.patch.object(MultiModalProcessorOnlyCache, "get_and_update_item", served),
            *_around_apply(marked)]


def errors_swallowed() -> list[Any]:
    """vLLM's backend swallows its own errors: a request it cannot place is served as text,
    its items dropped silently."""

    def swallowing(self: Any, original: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, inputs, *args, **kwargs)
        except Exception:
            text = dataclasses.replace(inputs, mm_data_items=self.info.parse_mm_data({}),
                                       mm_uuid_items=None)
            return original(self, text, *args, **kwargs)

    return _around_apply(swallowing)
