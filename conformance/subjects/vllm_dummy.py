"""The dummy inputs vLLM profiles memory with, as each implementation builds them: what the
dummy-data check compares (checks/dummy_data.py). Made through the one vLLM adapter's
processors (subjects/vllm.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from conformance.subjects.vllm import create_processor


@dataclass(frozen=True)
class DummyItems:
    """One implementation's dummy items of a modality, as vLLM profiles memory with them."""

    sizes: tuple[tuple[int, ...], ...]  # per item: an image (width, height), an audio (samples,)
    embeds: tuple[int, ...]  # per item: the embeddings its placeholder holds once processed


def dummy_items(path: str, impl: str, modality: str,
                options: Mapping[str, int] | None = None) -> DummyItems:
    """The dummy item vLLM profiles one item of `modality` with (its encoder profile asks
    `get_dummy_mm_inputs({modality: 1})`), with the dummy options a deployment gives as
    `limit_mm_per_prompt={modality: {"count": 1, **options}}`; raises what building or
    processing it raises (an engine that cannot process it does not start)."""
    processor = create_processor(path, impl, {modality: {"count": 1, **options} if options else 1})
    # The builder's own items (sizes) are read from the very inputs `get_dummy_mm_inputs`
    # builds and then processes, kept on their way (an instance attribute over the method):
    # building them a second time doubled the cost of the backend's 10000x10000 dummy image
    # (about 0.5 s of a 1.3 s call, docs/performance.md).
    built: list[Any] = []
    build = processor.get_dummy_inputs
    processor.get_dummy_inputs = lambda *a, **k: built.append(build(*a, **k)) or built[-1]
    try:
        placed = processor.get_dummy_mm_inputs({modality: 1})["mm_placeholders"].get(modality, [])
    finally:
        del processor.get_dummy_inputs
    items = built[0].mm_data_items[modality]
    sizes = tuple((items.get_image_size(i).width, items.get_image_size(i).height)
                  if modality == "image" else (items.get_audio_length(i),)
                  for i in range(items.get_count()))
    return DummyItems(sizes, tuple(int(p.get_num_embeds()) for p in placed))
