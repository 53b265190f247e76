"""Faults in vLLM's Transformers backend's model, patched in this process only (its logits, its
encoder's output, its M-RoPE positions, its pooler, the config it builds from): each a bug the
model-level checks must catch."""

from __future__ import annotations

import dataclasses
from typing import Any
from unittest import mock


def logits_negated() -> list[Any]:
    """vLLM's backend model returns the negated logits: every greedy choice changes."""
    from vllm.model_executor.models.transformers.causal import CausalMixin

    original = CausalMixin.compute_logits

    def compute_logits(self: Any, *args: Any, **kwargs: Any) -> Any:
        logits = original(self, *args, **kwargs)
        return None if logits is None else -logits

    return [mock.patch.object(CausalMixin, "compute_logits", compute_logits)]


def logits_scaled() -> list[Any]:
    """vLLM's backend model returns its logits times 1 + 1e-3: the same greedy tokens, top
    logprobs off by about 1e-3 (a cast or a scale slipped into the head)."""
    from vllm.model_executor.models.transformers.causal import CausalMixin

    original = CausalMixin.compute_logits

    def compute_logits(self: Any, *args: Any, **kwargs: Any) -> Any:
        logits = original(self, *args, **kwargs)
        return None if logits is None else logits * (1 + 1e-3)

    return [mock.patch.object(CausalMixin, "compute_logits", compute_logits)]


def pooled_rolled() -> list[Any]:
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


def row_shifted() -> list[Any]:
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


def text_only_stack() -> list[Any]:
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


def mrope_shifted() -> list[Any]:
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


def config_default() -> list[Any]:
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
