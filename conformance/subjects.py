"""Subjects and oracles: one small adapter each, all answering with `impl.ProcessedPrompt`.

- `impl`: our reference implementation (optionally with a planted fault, see faults.py);
- `vllm-backend`: vLLM's in-tree Transformers backend processor (`model_impl="transformers"`);
- `vllm-native`: vLLM's native processor for the architecture (the oracle);
- `hf`: the HF processor's own expansion, a second oracle that needs no vLLM model.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from conformance.cases import Case
from conformance.oracle import from_vllm_output, model_options
from fixtures.recipe import Recipe
from impl.types import Placeholder, ProcessedPrompt

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SUBJECTS = ("impl", "vllm-backend")
ORACLES = ("vllm-native", "hf")
MAX_ITEMS = 8
_TYPE_IDS = {"image": 1, "video": 2, "audio": 3}


class VllmSubject:
    """A vLLM multimodal processor created through the registry, as the engine would.

    A case's processor options are model-level (`LLM(mm_processor_kwargs=...)`, how a
    deployment sets them), so each distinct set gets its own `ModelConfig` and processor; impl
    and the HF oracle take them the same way.
    """

    def __init__(self, name: str, model_impl: str, path: str, recipe: Recipe):
        self.name, self.model_impl, self.path, self.recipe = name, model_impl, path, recipe
        self._processors: dict[tuple, Any] = {}

    def model_config(self, options: tuple[tuple[str, Any], ...] = ()) -> Any:
        from vllm.config import ModelConfig

        return ModelConfig(
            **model_options(self.path, self.model_impl),
            model=self.path, model_impl=self.model_impl, max_model_len=4096,
            limit_mm_per_prompt={m: MAX_ITEMS for m in self.recipe.modalities},
            mm_processor_kwargs=dict(options) or None,
            # Sizes the cache `new_cache` makes; `process` uses none unless given one.
            mm_processor_cache_gb=4,
        )

    def processor_for(self, options: tuple[tuple[str, Any], ...] = ()) -> Any:
        if options not in self._processors:
            from vllm.multimodal import MULTIMODAL_REGISTRY

            self._processors[options] = MULTIMODAL_REGISTRY.create_processor(
                self.model_config(options))
        return self._processors[options]

    @property
    def processor(self) -> Any:
        return self.processor_for()

    def hf_processor(self) -> Any:
        return self.processor.info.get_hf_processor()

    def new_cache(self, options: tuple[tuple[str, Any], ...] = ()) -> Any:
        from vllm.multimodal.cache import MultiModalProcessorOnlyCache

        return MultiModalProcessorOnlyCache(self.model_config(options))

    def process(self, case: Case, *, cache: Any = None, as_tokens: bool = False) -> ProcessedPrompt:
        processor = self.processor_for(case.processor_kwargs)
        prompt: str | list[int] = case.prompt(self.recipe.placeholder[case.modality])
        if as_tokens:
            tokenizer = processor.info.get_tokenizer()
            prompt = tokenizer.encode(prompt, add_special_tokens=self.recipe.add_special_tokens)
        mm_items = processor.info.parse_mm_data(case.mm_data())
        return from_vllm_output(processor(prompt, mm_items, cache=cache))


class _Checkpoint:
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


class HfSubject(_Checkpoint):
    """The HF processor's expansion: `input_ids`, and per item the span its modality's token
    type marks, cut by `_get_num_multimodal_tokens` where the processor defines it; the
    embedding positions are where the model's own token for the modality sits (what the HF
    model scatters features into)."""

    name = "hf"

    @functools.lru_cache(maxsize=4)  # noqa: B019 - one subject per checkpoint and process
    def embed_token_id(self, modality: str) -> int:
        """The token the HF model scatters this modality's encoder rows into."""
        config = self.config
        for name in (f"{modality}_token_id", f"{modality}_token_index"):
            value = getattr(config, name, None)
            if value is not None:
                return int(value)
        raise ValueError(f"{type(config).__name__} names no {modality} token id")

    def process(self, case: Case, **_: Any) -> ProcessedPrompt:
        text = case.prompt(self.recipe.placeholder[case.modality])
        media_key = {"image": "images", "audio": "audio"}[case.modality]
        processor = self.processor_for(case.processor_kwargs)
        out = processor(text=text, **{media_key: case.items()}, return_mm_token_type_ids=True,
                        return_tensors="pt", **dict(case.processor_kwargs))
        ids = tuple(out["input_ids"][0].tolist())
        type_ids = out.get("mm_token_type_ids", out.get("token_type_ids"))
        if type_ids is not None:
            marked = [i for i, t in enumerate(type_ids[0].tolist())
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
        return ProcessedPrompt(ids, {case.modality: placeholders} if placeholders else {})

    def counts(self, case: Case) -> list[int] | None:
        counter = getattr(self.processor_for(case.processor_kwargs),
                          "_get_num_multimodal_tokens", None)
        if counter is None or case.modality != "image":
            return None
        sizes = [[m.height, m.width] for m in case.media]
        return list(counter(image_sizes=sizes, **dict(case.processor_kwargs))["num_image_tokens"])


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


class ImplSubject(_Checkpoint):
    """Our reference implementation on the fixture's HF processor."""

    def __init__(self, path: str, recipe: Recipe, fault: str | None = None):
        super().__init__(path, recipe)
        self.fault = fault
        self.name = "impl" if fault is None else f"impl+{fault}"

    def hf_processor(self) -> Any:
        return self.processor

    def process(self, case: Case, *, as_tokens: bool = False, **_: Any) -> ProcessedPrompt:
        import impl.pipeline
        from conformance.faults import planted

        prompt: str | list[int] = case.prompt(self.recipe.placeholder[case.modality])
        # impl's steps are looked up at call time, so a planted fault can stand in for them
        with planted(self.fault):
            processor = self.processor_for(case.processor_kwargs)
            if as_tokens:
                prompt = processor.tokenizer.encode(
                    prompt, add_special_tokens=self.recipe.add_special_tokens)
            return impl.pipeline.process(processor, prompt, case.mm_data(),
                                         processor_kwargs=dict(case.processor_kwargs),
                                         config=self.config)


def make_subject(name: str, path: str, recipe: Recipe, fault: str | None = None) -> Any:
    if name == "impl":
        return ImplSubject(path, recipe, fault)
    if name == "vllm-backend":
        return VllmSubject(name, "transformers", path, recipe)
    if name == "vllm-native":
        return VllmSubject(name, "vllm", path, recipe)
    if name == "hf":
        return HfSubject(path, recipe)
    raise KeyError(f"unknown subject {name!r} (known: {', '.join(SUBJECTS + ORACLES)})")
