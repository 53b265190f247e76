"""Faults planted on purpose, to prove that each check can fail (and says why).

Three kinds, by what they change:
- `impl`: one step of our reference implementation (the `impl` subject plants it per call);
- `backend`: vLLM's Transformers backend itself, patched in this process only (its processor
  or its model class; never the installed files);
- `media`: the subject's media for the checkpoint-level checks (items swapped), so that the
  subject computes on other data than the oracle.

`with planted(name):` patches for the duration of the block (impl and backend faults);
`media_fault(name)` gives the hook the checkpoint-level checks apply to the subject's items.
Reproducer scripts name the fault, so a planted failure reproduces on its own.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

from conformance.core.subjects import IMPL, VLLM_BACKEND


def _no_unpad() -> list[Any]:
    """Padded batches stay padded: an item's data depends on its neighbours."""
    return [
        mock.patch("impl.pipeline.apply_unpad_images", lambda hf_inputs: None),
        mock.patch("impl.pipeline.reprocess_audios", lambda *args, **kwargs: None),
    ]


def _shift(placeholder: Any) -> Any:
    return dataclasses.replace(
        placeholder, offset=placeholder.offset + 1,
        embed_positions=tuple(p + 1 for p in placeholder.embed_positions))


def _offset_shift() -> list[Any]:
    """The last item's placeholder starts one token late."""
    import impl.pipeline as pipeline

    original = pipeline.process

    def process(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        placeholders = {m: ps[:-1] + (_shift(ps[-1]),) if ps else ps
                        for m, ps in out.placeholders.items()}
        return dataclasses.replace(out, placeholders=placeholders)

    return [mock.patch("impl.pipeline.process", process)]


def _wrong_embed_token() -> list[Any]:
    """The embedding token is the replacement's least frequent token, not its most frequent."""
    import torch

    def least_frequent(ids: Any) -> int:
        values = ids.tolist() if isinstance(ids, torch.Tensor) else list(ids)
        return min(sorted(set(values), reverse=True), key=values.count)

    def legacy_ids(processor: Any, config: Any, tokenizer: Any, modality: str) -> list[int]:
        # every token the processor marks as the modality, structure tokens included
        return list(range(len(tokenizer)))

    return [mock.patch("impl.offsets.embed_token_id", least_frequent),
            mock.patch("impl.pipeline.mm_token_ids", legacy_ids)]


def _wrong_slice_dim() -> list[Any]:
    """Fields are cut along dimension 0, even behind a leading batch dimension (Idefics3)."""
    import impl.pipeline as pipeline

    original = pipeline.field_specs

    def field_specs(processor: Any, hf_inputs: Any) -> Any:
        return {key: dataclasses.replace(spec, dim=0)
                for key, spec in original(processor, hf_inputs).items()}

    return [mock.patch("impl.pipeline.field_specs", field_specs)]


def _hash_neighbours() -> list[Any]:
    """An item's cache key mixes in every item of its request."""
    import impl.pipeline as pipeline

    original = pipeline.process

    def process(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        hashes = {}
        for modality, own in out.item_hashes.items():
            together = "".join(own)
            hashes[modality] = tuple(hashlib.sha256((h + together).encode()).hexdigest()
                                     for h in own)
        return dataclasses.replace(out, item_hashes=hashes)

    return [mock.patch("impl.pipeline.process", process)]


def _options_ignored() -> list[Any]:
    """Model-level processor options never reach the processor."""
    import impl.hf
    import impl.pipeline as pipeline

    load, process = impl.hf.load_processor, pipeline.process

    def process_without(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("processor_kwargs", None)
        return process(*args, **kwargs)

    return [mock.patch("impl.hf.load_processor", lambda path, options=None: load(path)),
            mock.patch("impl.pipeline.process", process_without)]


def _errors_swallowed() -> list[Any]:
    """Input the backend cannot place is accepted silently: nothing is placed, nothing raised."""
    import impl.pipeline as pipeline
    from impl.types import ProcessedPrompt

    original = pipeline.process

    def process(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        except (AssertionError, ValueError, RuntimeError, NotImplementedError):
            return ProcessedPrompt((), {})

    return [mock.patch("impl.pipeline.process", process)]


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


def _backend_offset_shift() -> list[Any]:
    """vLLM's backend processor places each request's last item one token late."""

    def shifted(_processor: Any, out: Any) -> Any:
        for modality, ranges in list(out["mm_placeholders"].items()):
            if ranges:
                last = dataclasses.replace(ranges[-1], offset=ranges[-1].offset + 1)
                out["mm_placeholders"][modality] = [*ranges[:-1], last]
        return out

    return _rewrap_apply(shifted)


def _backend_request_options_ignored() -> list[Any]:
    """vLLM's backend processor drops each request's own processor options (its
    `mm_processor_kwargs`, reaching the processor as `hf_processor_mm_kwargs`): the request is
    processed, and its items keyed in the processor cache, as if it gave none."""
    return _around_apply(lambda self, original, inputs, *args, **kwargs: original(
        self, dataclasses.replace(inputs, hf_processor_mm_kwargs={}), *args, **kwargs))


SCOPED_GROUPS = ("images_kwargs", "audio_kwargs", "videos_kwargs")  # transformers' groups


def _unscoped(options: Any) -> dict[str, Any]:
    return {k: v for k, v in dict(options).items() if k not in SCOPED_GROUPS}


def _backend_scoped_options_ignored() -> list[Any]:
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


def _backend_disk_options_ignored() -> list[Any]:
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


def _backend_cache_key_without_options() -> list[Any]:
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


def _backend_rows_per_token() -> list[Any]:
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


def _backend_fields_one_modality() -> list[Any]:
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


def _backend_budget_one_short() -> list[Any]:
    """vLLM's backend reports one embedding fewer per item than its largest item has (an
    off-by-one; halving would coincide with a known over-count: Qwen2-Audio's 1500 vs 750)."""
    from vllm.model_executor.models.transformers import multimodal

    info = multimodal.MultiModalProcessingInfo
    original = info.get_mm_max_tokens_per_item

    def short(self: Any, *args: Any, **kwargs: Any) -> Any:
        found = original(self, *args, **kwargs)
        return {modality: n - 1 for modality, n in found.items()}

    return [mock.patch.object(info, "get_mm_max_tokens_per_item", short)]


def _backend_budget_options_ignored() -> list[Any]:
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


def _backend_dummy_options_dropped() -> list[Any]:
    """vLLM's backend builds its dummy items without the deployment's dummy options
    (`limit_mm_per_prompt={"image": {"width": 64, ...}}`): it profiles its largest item."""
    from vllm.config.multimodal import MultiModalDummyOptions
    from vllm.model_executor.models.transformers import multimodal

    builder = multimodal.MultiModalDummyInputsBuilder
    original = builder.get_dummy_mm_data

    def dropped(self: Any, seq_len: int, mm_counts: Any, mm_options: Any) -> Any:
        return original(self, seq_len, mm_counts, MultiModalDummyOptions())

    return [mock.patch.object(builder, "get_dummy_mm_data", dropped)]


def _backend_logits_negated() -> list[Any]:
    """vLLM's backend model returns the negated logits: every greedy choice changes."""
    from vllm.model_executor.models.transformers.causal import CausalMixin

    original = CausalMixin.compute_logits

    def compute_logits(self: Any, *args: Any, **kwargs: Any) -> Any:
        logits = original(self, *args, **kwargs)
        return None if logits is None else -logits

    return [mock.patch.object(CausalMixin, "compute_logits", compute_logits)]


def _backend_one_item() -> list[Any]:
    """vLLM's backend takes one item of each modality per prompt."""
    from vllm.model_executor.models.transformers import multimodal

    info = multimodal.MultiModalProcessingInfo
    original = info.get_supported_mm_limits

    def one(self: Any) -> Any:
        return dict.fromkeys(original(self), 1)

    return [mock.patch.object(info, "get_supported_mm_limits", one)]


def _backend_logits_scaled() -> list[Any]:
    """vLLM's backend model returns its logits times 1 + 1e-3: the same greedy tokens, top
    logprobs off by about 1e-3 (a cast or a scale slipped into the head)."""
    from vllm.model_executor.models.transformers.causal import CausalMixin

    original = CausalMixin.compute_logits

    def compute_logits(self: Any, *args: Any, **kwargs: Any) -> Any:
        logits = original(self, *args, **kwargs)
        return None if logits is None else logits * (1 + 1e-3)

    return [mock.patch.object(CausalMixin, "compute_logits", compute_logits)]


def _backend_pooled_rolled() -> list[Any]:
    """vLLM's backend pooling models hand their pooler the hidden states one token late (the
    last token's state first): every token's pooled state is its neighbour's."""
    import torch
    from vllm.model_executor.models.transformers import pooling

    patches = []
    for mixin in (pooling.EmbeddingMixin, pooling.SequenceClassificationMixin):
        # the forward next in the instance's MRO (the multimodal mixin's), as unpatched
        def forward(self: Any, *args: Any, _mixin: type = mixin, **kwargs: Any) -> Any:
            hidden = super(_mixin, self).forward(*args, **kwargs)
            return torch.roll(hidden, 1, 0) if isinstance(hidden, torch.Tensor) else hidden

        patches.append(mock.patch.object(mixin, "forward", forward, create=True))
    return patches


def _backend_row_shifted() -> list[Any]:
    """vLLM's backend hands each item's embedding rows over one row late (the first row
    repeated, the last dropped): the right rows, each at its neighbour's position."""
    import torch
    from vllm.model_executor.models.transformers import multimodal

    mixin = multimodal.MultiModalMixin
    original = mixin.embed_multimodal

    def embed_multimodal(self: Any, **kwargs: Any) -> Any:
        return [torch.cat([e[:1], e[:-1]]) if e.shape[0] > 1 else e
                for e in original(self, **kwargs)]

    return [mock.patch.object(mixin, "embed_multimodal", embed_multimodal)]


def _backend_text_only_stack() -> list[Any]:
    """vLLM's backend stacks the request's image grids unconditionally: a text-only request on
    an M-RoPE model crashes (`torch.stack` of no tensors)."""
    import torch
    from vllm.model_executor.models.transformers import multimodal

    mixin = multimodal.MultiModalMixin
    original = mixin.get_mrope_input_positions

    def positions(self: Any, input_tokens: list[int], mm_features: list) -> Any:
        if not mm_features:
            torch.stack([])  # raises, as the unguarded stack does
        return original(self, input_tokens, mm_features)

    return [mock.patch.object(mixin, "get_mrope_input_positions", positions)]


def _backend_bos_doubled() -> list[Any]:
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


def _backend_embed_dropped() -> list[Any]:
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


def _backend_hash_per_request() -> list[Any]:
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


def _backend_field_entry_dropped() -> list[Any]:
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


def _backend_cache_stale_fields() -> list[Any]:
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


def _backend_errors_swallowed() -> list[Any]:
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


def _backend_mrope_shifted() -> list[Any]:
    """vLLM's backend starts every M-RoPE position one too high (all three rows)."""
    from vllm.model_executor.models.transformers import multimodal

    mixin = multimodal.MultiModalMixin
    original = mixin.get_mrope_input_positions

    def positions(self: Any, input_tokens: list[int], mm_features: list) -> Any:
        found, delta = original(self, input_tokens, mm_features)
        return found + 1, delta

    return [mock.patch.object(mixin, "get_mrope_input_positions", positions)]


def class_default(config: Any, name: str) -> Any:
    """The default the config's class gives field `name` (transformers 5's configs are
    dataclasses); `dataclasses.MISSING` where it has none."""
    found = getattr(type(config), "__dataclass_fields__", {}).get(name)
    if found is None:
        return dataclasses.MISSING
    if found.default_factory is not dataclasses.MISSING:
        return found.default_factory()
    return found.default


def _backend_config_default() -> list[Any]:
    """vLLM's backend encodes images with the class defaults of the config fields the HF
    model's `get_image_features` takes (vision_feature_layer, vision_feature_select_strategy)
    instead of the checkpoint's values: it assumes a field's default. A fixture that keeps the
    defaults is unaffected; a config variant that sets them (llava~last_layer) is not."""
    import inspect

    from vllm.model_executor.models.transformers import multimodal

    mixin = multimodal.MultiModalMixin

    def defaults(self: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
        config = self.model.config
        for name in inspect.signature(self.model.get_image_features).parameters:
            default = class_default(config, name)
            if name not in kwargs and default is not dataclasses.MISSING and \
                    getattr(config, name, default) != default:
                kwargs[name] = default
        return kwargs

    if hasattr(mixin, "_get_image_features"):  # vLLM 0.31.0, 0.32.0
        original = mixin._get_image_features

        def features(self: Any, pixel_values: Any, **kwargs: Any) -> Any:
            return original(self, pixel_values, **defaults(self, kwargs))

        return [mock.patch.object(mixin, "_get_image_features", features)]
    modal = mixin._get_features  # 0.33.0 on: one method for every modality

    def any_features(self: Any, modality: str, pixel_values: Any, **kwargs: Any) -> Any:
        if modality == "image":
            kwargs = defaults(self, kwargs)
        return modal(self, modality, pixel_values, **kwargs)

    return [mock.patch.object(mixin, "_get_features", any_features)]


def swap_first_two(items: list) -> list:
    return [items[1], items[0], *items[2:]] if len(items) > 1 else items


FAULTS: dict[str, Callable[[], list[Any]]] = {
    "no-unpad": _no_unpad,
    "offset-shift": _offset_shift,
    "wrong-embed-token": _wrong_embed_token,
    "wrong-slice-dim": _wrong_slice_dim,
    "hash-neighbours": _hash_neighbours,
    "options-ignored": _options_ignored,
    "errors-swallowed": _errors_swallowed,
    "backend-offset-shift": _backend_offset_shift,
    "backend-request-options-ignored": _backend_request_options_ignored,
    "backend-scoped-options-ignored": _backend_scoped_options_ignored,
    "backend-disk-options-ignored": _backend_disk_options_ignored,
    "backend-cache-key-without-options": _backend_cache_key_without_options,
    "backend-budget-one-short": _backend_budget_one_short,
    "backend-budget-options-ignored": _backend_budget_options_ignored,
    "backend-dummy-options-dropped": _backend_dummy_options_dropped,
    "backend-rows-per-token": _backend_rows_per_token,
    "backend-fields-one-modality": _backend_fields_one_modality,
    "backend-logits-negated": _backend_logits_negated,
    "backend-text-only-stack": _backend_text_only_stack,
    "backend-logits-scaled": _backend_logits_scaled,
    "backend-row-shifted": _backend_row_shifted,
    "backend-pooled-rolled": _backend_pooled_rolled,
    "backend-one-item": _backend_one_item,
    "backend-bos-doubled": _backend_bos_doubled,
    "backend-embed-dropped": _backend_embed_dropped,
    "backend-hash-per-request": _backend_hash_per_request,
    "backend-field-entry-dropped": _backend_field_entry_dropped,
    "backend-cache-stale-fields": _backend_cache_stale_fields,
    "backend-errors-swallowed": _backend_errors_swallowed,
    "backend-mrope-shifted": _backend_mrope_shifted,
    "backend-config-default": _backend_config_default,
}
# media faults: hooks applied to the subject's items by the checkpoint-level checks
MEDIA_FAULTS: dict[str, Callable[[list], list]] = {"swapped-items": swap_first_two}


def media_fault(spec: str | None) -> Callable[[list], list] | None:
    """The media hook of `spec` (None when it is no media fault or not active)."""
    name = active(spec)
    return MEDIA_FAULTS.get(name) if name else None


def kind(name: str) -> str:
    """`impl`, `backend` or `media`."""
    if name in MEDIA_FAULTS:
        return "media"
    if name.startswith("backend-"):
        return "backend"
    if name in FAULTS:
        return "impl"
    raise KeyError(f"unknown fault {name!r} (known: {', '.join([*FAULTS, *MEDIA_FAULTS])})")


# The subject each fault targets, by its registered name: a cell plants a fault only where its
# subject is the target (`run/cell.py`). impl's steps are impl's; vLLM's backend and the media
# the checkpoint-level checks hand it are the backend's.
TARGETS: dict[str, str] = {
    **{name: VLLM_BACKEND if name.startswith("backend-") else IMPL for name in FAULTS},
    **dict.fromkeys(MEDIA_FAULTS, VLLM_BACKEND),
}


def target(name: str) -> str:
    """The registered name of the subject the fault `name` targets."""
    if name not in TARGETS:
        raise KeyError(f"unknown fault {name!r} (known: {', '.join(TARGETS)})")
    return TARGETS[name]


def routed(spec: str | None, subject: str) -> str | None:
    """`spec` where the fault it names is active and targets the subject named `subject`."""
    name = active(spec)
    return spec if name is not None and target(name) == subject else None


def active(spec: str | None) -> str | None:
    """`name` or `name>=VERSION` (planted only from that transformers version on): the fault
    to plant under the installed transformers, if any."""
    if not spec:
        return None
    name, _, since = spec.partition(">=")
    if since:
        import transformers

        from impl.version import at_least

        if not at_least(transformers.__version__, since):
            return None
    return name


PLANTED: list[str] = []  # the faults planted now (outputs computed meanwhile are not kept)


def planted(spec: str | None) -> contextlib.AbstractContextManager[None]:
    """The fault `spec` names planted for a `with` block; nothing to plant (no fault, a media
    fault, or one not active under this transformers) costs no generator: impl's subject
    enters this once per prompt."""
    name = active(spec)
    if name is None or name in MEDIA_FAULTS:
        return contextlib.nullcontext()
    if name not in FAULTS:
        raise KeyError(f"unknown fault {name!r} (known: {', '.join(FAULTS)})")
    return _planting(name)


@contextlib.contextmanager
def _planting(name: str) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for patch in FAULTS[name]():
            stack.enter_context(patch)
        PLANTED.append(name)
        try:
            yield
        finally:
            PLANTED.pop()
