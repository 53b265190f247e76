"""Faults in one step of our reference implementation, `impl` (the `impl` subject plants each
per call): what the processing checks' proofs plant in `impl/` to show they can fail."""

from __future__ import annotations

import dataclasses
import hashlib
from types import ModuleType
from typing import Any
from unittest import mock

from impl.types import ProcessedPrompt


def impl_pipeline() -> ModuleType:
    """impl's pipeline, whose steps these faults wrap: imported when a fault is planted."""
    import impl.pipeline  # lazy: it loads torch (0.9 s), which every importer of the faults
    # (the cell runner, `conformance run` validating --fault) would pay for otherwise

    return impl.pipeline


def no_unpad() -> list[Any]:
    """Padded batches stay padded: an item's data depends on its neighbours."""
    return [
        mock.patch("impl.pipeline.apply_unpad_images", lambda hf_inputs: None),
        mock.patch("impl.pipeline.reprocess_audios", lambda *args, **kwargs: None),
    ]


def _shift(placeholder: Any) -> Any:
    return dataclasses.replace(
        placeholder, offset=placeholder.offset + 1,
        embed_positions=tuple(p + 1 for p in placeholder.embed_positions))


def offset_shift() -> list[Any]:
    """The last item's placeholder starts one token late."""
    original = impl_pipeline().process

    def process(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        placeholders = {m: ps[:-1] + (_shift(ps[-1]),) if ps else ps
                        for m, ps in out.placeholders.items()}
        return dataclasses.replace(out, placeholders=placeholders)

    return [mock.patch("impl.pipeline.process", process)]


def wrong_embed_token() -> list[Any]:
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


def wrong_slice_dim() -> list[Any]:
    """Fields are cut along dimension 0, even behind a leading batch dimension (Idefics3)."""
    original = impl_pipeline().field_specs

    def field_specs(processor: Any, hf_inputs: Any, **kwargs: Any) -> Any:
        return {key: dataclasses.replace(spec, dim=0)
                for key, spec in original(processor, hf_inputs, **kwargs).items()}

    return [mock.patch("impl.pipeline.field_specs", field_specs)]


def hash_neighbours() -> list[Any]:
    """An item's cache key mixes in every item of its request."""
    original = impl_pipeline().process

    def process(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        hashes = {}
        for modality, own in out.item_hashes.items():
            together = "".join(own)
            hashes[modality] = tuple(hashlib.sha256((h + together).encode()).hexdigest()
                                     for h in own)
        return dataclasses.replace(out, item_hashes=hashes)

    return [mock.patch("impl.pipeline.process", process)]


def options_ignored() -> list[Any]:
    """Model-level processor options never reach the processor."""
    import impl.hf  # lazy: torch, as `impl_pipeline`

    load, process = impl.hf.load_processor, impl_pipeline().process

    def process_without(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("processor_kwargs", None)
        return process(*args, **kwargs)

    return [mock.patch("impl.hf.load_processor", lambda path, options=None: load(path)),
            mock.patch("impl.pipeline.process", process_without)]


def errors_swallowed() -> list[Any]:
    """Input the backend cannot place is accepted silently: nothing is placed, nothing raised."""
    original = impl_pipeline().process

    def process(*args: Any, **kwargs: Any) -> Any:
        try:
            return original(*args, **kwargs)
        except (AssertionError, ValueError, RuntimeError, NotImplementedError):
            return ProcessedPrompt((), {})

    return [mock.patch("impl.pipeline.process", process)]
