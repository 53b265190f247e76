"""The HF processor's own expansion: the oracle for architectures without a native vLLM model,
and the second oracle of every other (what the HF model itself scatters features into)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from conformance.core.subjects import HF
from conformance.inputs.cases import Case
from conformance.inputs.forms import DISK, SCOPED_FORMS, disk_folder, options_key, scoped
from conformance.inputs.media import video_metadata
from conformance.subjects.hf_expansion import embed_token_id, hf_expansion, hf_media
from fixtures.recipe import Recipe
from impl.types import Placeholder, ProcessedPrompt

# The prompt's own outputs, over its tokens: what remains of a one-item call is that item's
PROMPT_KEYS = ("input_ids", "attention_mask", "token_type_ids", "mm_token_type_ids")


class CheckpointFiles:
    """The checkpoint's own HF processor (one per set of model-level options) and config."""

    def __init__(self, path: str, recipe: Recipe):
        self.path, self.recipe = path, recipe
        self._processors: dict[tuple[str, str], Any] = {}

    def processor_for(self, options: tuple[tuple[str, Any], ...] = (),
                      path: str | None = None) -> Any:
        """`path`: another checkpoint folder (the disk form's copy of this one)."""
        key = (path or self.path, options_key(options))
        if key not in self._processors:
            # lazy: impl.hf imports torch (+1.1 s), kept out of importing the subjects package
            from impl.hf import load_processor

            self._processors[key] = load_processor(path or self.path, dict(options))
        return self._processors[key]

    def disk_case(self, case: Case, form: str) -> tuple[Case, str | None]:
        """The case and checkpoint folder to process for `form` where the form is `disk`
        (the case without options, on the copy holding them), else the case as it is: the HF
        processor takes options as call kwargs (or construction arguments) in any other form
        alike, flat or scoped, so their flat form is what each means to it."""
        if form != DISK or not case.processor_kwargs:
            return case, None
        folder = disk_folder(self.path, case.processor_kwargs, case.modality)
        return replace(case, processor_kwargs=()), str(folder)

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

    name = HF
    capabilities: frozenset[str] = frozenset()

    @functools.lru_cache(maxsize=4)  # noqa: B019 - one subject per checkpoint and process
    def embed_token_id(self, modality: str) -> int:
        return embed_token_id(self.config, modality)

    def process(self, case: Case, *, request_kwargs: Mapping[str, Any] | None = None,
                form: str = "", **_: Any) -> ProcessedPrompt:
        """`request_kwargs`: options of this request alone. The HF processor has no model
        level to tell them from: a request's options are what the case's own are to it (call
        kwargs, and construction arguments where its `__call__` takes none: `load_processor`),
        so it takes them by processing the case under both, the request's winning. `form`:
        the case's options in that form (`disk_case`)."""
        case, folder = self.disk_case(case, form)
        if form in SCOPED_FORMS and case.processor_kwargs:
            return self.scoped(case)
        if request_kwargs:
            merged = {**dict(case.processor_kwargs), **dict(request_kwargs)}
            return self.process(replace(case, processor_kwargs=tuple(sorted(merged.items()))))
        ids, spans, out = hf_expansion(
            self.processor_for(case.processor_kwargs, folder), self.config,
            case.prompt(self.recipe.placeholder[case.modality]), case.modality, case.items(),
            sizes=[(m.height, m.width, m.frames) for m in case.media],
            options=dict(case.processor_kwargs),
            metadata=video_metadatas(case))
        placeholders = tuple(Placeholder(offset, length, tuple(embeds))
                             for offset, length, embeds in spans)
        fields = {k: v for k, v in out.items() if k not in PROMPT_KEYS}
        return ProcessedPrompt(tuple(ids), {case.modality: placeholders} if placeholders else {},
                               {case.modality: [fields]} if len(case.media) == 1 else {})


    def scoped(self, case: Case) -> ProcessedPrompt:
        """The case's options scoped by its modality (`{"images_kwargs": {...}}`), as a call
        kwarg of the default processor: what transformers makes of them in that form (an option
        only its construction takes is then not applied, Qwen2-VL's `max_pixels`), counted
        with them flat (the count helper takes no group)."""
        flat = dict(case.processor_kwargs)
        ids, spans, out = hf_expansion(
            self.processor, self.config,
            case.prompt(self.recipe.placeholder[case.modality]), case.modality, case.items(),
            sizes=[(m.height, m.width, m.frames) for m in case.media],
            options=scoped(flat, case.modality), count_options=flat,
            metadata=video_metadatas(case))
        placeholders = tuple(Placeholder(offset, length, tuple(embeds))
                             for offset, length, embeds in spans)
        fields = {k: v for k, v in out.items() if k not in PROMPT_KEYS}
        return ProcessedPrompt(tuple(ids), {case.modality: placeholders} if placeholders else {},
                               {case.modality: [fields]} if len(case.media) == 1 else {})


def image_outputs(processor: Any, case: Case) -> dict[str, Any]:
    """The HF processor's outputs for a case's images beside the dummy prompt the backend's
    Offsets path sends them with (its `get_dummy_text`), unpadded as it returns them."""
    # lazy: impl.dummy imports numpy (+0.14 s), not otherwise loaded by the subjects package
    from impl.dummy import dummy_text

    # lazy: impl.hf imports torch (+1.1 s), kept out of importing the subjects package
    from impl.hf import call_processor

    text = dummy_text(processor, {"image": len(case.media)})
    return call_processor(processor, {"text": text, "images": case.items()},
                          {**dict(case.processor_kwargs), "truncation": False})


def video_inputs(processor: Any, case: Case) -> dict[str, Any]:
    """A case's videos as vLLM's backend hands them to the HF processor."""
    return hf_media(processor, "video", case.items(), video_metadatas(case))


def video_metadatas(case: Case) -> list[dict[str, Any]] | None:
    """vLLM's metadata of each of a case's videos (every frame kept)."""
    return [video_metadata(m.frames) for m in case.media] if case.modality == "video" else None
