"""The HF processor's own expansion: the oracle for architectures without a native vLLM model,
and the second oracle of every other (what the HF model itself scatters features into)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from conformance.inputs.cases import Case
from conformance.inputs.media import video_metadata
from fixtures.recipe import Recipe
from impl.types import Placeholder, ProcessedPrompt

_TYPE_IDS = {"image": 1, "video": 2, "audio": 3}
# The prompt's own outputs, over its tokens: what remains of a one-item call is that item's
PROMPT_KEYS = ("input_ids", "attention_mask", "token_type_ids", "mm_token_type_ids")


class CheckpointFiles:
    """The checkpoint's own HF processor (one per set of model-level options) and config."""

    def __init__(self, path: str, recipe: Recipe):
        self.path, self.recipe = path, recipe
        self._processors: dict[tuple, Any] = {}

    def processor_for(self, options: tuple[tuple[str, Any], ...] = ()) -> Any:
        if options not in self._processors:
            from impl.hf import load_processor

            self._processors[options] = load_processor(self.path, dict(options))
        return self._processors[options]

    @property
    def processor(self) -> Any:
        return self.processor_for()

    @functools.cached_property
    def config(self) -> Any:
        from transformers import AutoConfig

        return AutoConfig.from_pretrained(self.path)


class HfSubject(CheckpointFiles):
    """The HF processor's expansion: `input_ids`, and per item the span its modality's token
    type marks, cut by `_get_num_multimodal_tokens` where the processor defines it; the
    embedding positions are where the model's own token for the modality sits (what the HF
    model scatters features into). For a one-item case, its item fields are what the processor
    returns besides the prompt's own outputs, as it returns them (batched, float32)."""

    name = "hf"

    @functools.lru_cache(maxsize=4)  # noqa: B019 - one subject per checkpoint and process
    def embed_token_id(self, modality: str) -> int:
        return embed_token_id(self.config, modality)

    def process(self, case: Case, *, request_kwargs: Mapping[str, Any] | None = None,
                **_: Any) -> ProcessedPrompt:
        """`request_kwargs`: options of this request alone. The HF processor has no model
        level to tell them from: a request's options are what the case's own are to it (call
        kwargs, and construction arguments where its `__call__` takes none: `load_processor`),
        so it takes them by processing the case under both, the request's winning."""
        if request_kwargs:
            merged = {**dict(case.processor_kwargs), **dict(request_kwargs)}
            return self.process(replace(case, processor_kwargs=tuple(sorted(merged.items()))))
        text = case.prompt(self.recipe.placeholder[case.modality])
        processor = self.processor_for(case.processor_kwargs)
        media_key = {"image": "images", "audio": "audio"}.get(case.modality)
        media = video_inputs(processor, case) if media_key is None else {media_key: case.items()}
        # Videos of different frame counts do not stack into one tensor (LLaVA-OneVision's
        # processor): the expansion is what is compared, so their outputs stay lists.
        tensors = None if case.modality == "video" else "pt"
        out = processor(text=text, **media, return_mm_token_type_ids=True,
                        return_tensors=tensors, **dict(case.processor_kwargs))
        ids = tuple(first_row(out["input_ids"]))
        type_ids = out.get("mm_token_type_ids", out.get("token_type_ids"))
        if type_ids is not None:
            marked = [i for i, t in enumerate(first_row(type_ids))
                      if t == _TYPE_IDS[case.modality]]
        else:  # older processors mark nothing: runs of the model's own token stand in
            marked = [i for i, t in enumerate(ids) if t == self.embed_token_id(case.modality)]
        spans = split_marked(marked, self.counts(case) if type_ids is not None else None)
        # An item's marked tokens need not be contiguous (Aya Vision marks `TILE` of the
        # `TILE_1` it writes): its placeholder runs from its first to its last marked token.
        placeholders = tuple(
            Placeholder(span[0], span[-1] - span[0] + 1,
                        tuple(p for p in range(span[0], span[-1] + 1)
                              if ids[p] == self.embed_token_id(case.modality)))
            for span in spans
        )
        fields = {k: v for k, v in out.items() if k not in PROMPT_KEYS}
        return ProcessedPrompt(ids, {case.modality: placeholders} if placeholders else {},
                               {case.modality: [fields]} if len(case.media) == 1 else {})

    def counts(self, case: Case) -> list[int] | None:
        counter = getattr(self.processor_for(case.processor_kwargs),
                          "_get_num_multimodal_tokens", None)
        if counter is None or case.modality not in ("image", "video"):
            return None
        if case.modality == "video":  # counted per video since transformers 5.18
            sizes = [[m.frames, m.height, m.width] for m in case.media]
            return list(counter(video_sizes=sizes,
                                **dict(case.processor_kwargs))["num_video_tokens"])
        sizes = [[m.height, m.width] for m in case.media]
        return list(counter(image_sizes=sizes, **dict(case.processor_kwargs))["num_image_tokens"])


def embed_token_id(config: Any, modality: str) -> int:
    """The token the HF model scatters this modality's encoder rows into."""
    for name in (f"{modality}_token_id", f"{modality}_token_index"):
        value = getattr(config, name, None)
        if value is not None:
            return int(value)
    raise ValueError(f"{type(config).__name__} names no {modality} token id")


def image_outputs(processor: Any, case: Case) -> dict[str, Any]:
    """The HF processor's outputs for a case's images beside the dummy prompt the backend's
    Offsets path sends them with (its `get_dummy_text`), unpadded as it returns them."""
    from impl.dummy import dummy_text
    from impl.hf import call_processor

    text = dummy_text(processor, {"image": len(case.media)})
    return call_processor(processor, {"text": text, "images": case.items()},
                          {**dict(case.processor_kwargs), "truncation": False})


def video_inputs(processor: Any, case: Case) -> dict[str, Any]:
    """A case's videos as vLLM's backend hands them to the HF processor: the frames, and where
    the video processor samples frames, their metadata with sampling off (they are the
    frames a decoder kept)."""
    inputs: dict[str, Any] = {"videos": case.items()}
    if getattr(getattr(processor, "video_processor", None), "do_sample_frames", False):
        inputs["video_metadata"] = [
            {k: v for k, v in video_metadata(m.frames).items() if k != "do_sample_frames"}
            for m in case.media]
        inputs["do_sample_frames"] = False
    return inputs


def first_row(value: Any) -> list[int]:
    """The first prompt's row of a batched output, a tensor's or a list's."""
    row = value[0]
    return row.tolist() if hasattr(row, "tolist") else list(row)


def split_marked(marked: list[int], counts: list[int] | None) -> list[list[int]]:
    """Marked positions cut into items: by the counts, else into contiguous runs."""
    if counts is None:
        runs: list[list[int]] = []
        for position in marked:
            if runs and runs[-1][-1] == position - 1:
                runs[-1].append(position)
            else:
                runs.append([position])
        return runs
    if sum(counts) != len(marked):
        raise ValueError(f"processor marks {len(marked)} positions but counts {counts}")
    spans, start = [], 0
    for count in counts:
        spans.append(marked[start:start + count])
        start += count
    return spans


