"""The one vLLM adapter: every `ModelConfig`, processor and engine the harness makes, and the
one conversion of vLLM's processor output into impl's `ProcessedPrompt`.

The same checkpoint is served two ways, differing only in `model_impl`: "vllm" (the native
model, the oracle) and "transformers" (the backend under test). Subjects, oracles and the
model checks all come through here, so they see the checkpoint the same way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conformance.inputs.cases import Case
from impl.types import Placeholder, ProcessedPrompt, placeholder_from_mask

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

NATIVE, BACKEND = "vllm", "transformers"  # vLLM `model_impl` values
IMPLS = (NATIVE, BACKEND)
MAX_ITEMS = 8  # items of each modality a prompt may hold (limit_mm_per_prompt)
MAX_MODEL_LEN = 4096  # processing only: no KV cache is sized from it
ENGINE_MAX_MODEL_LEN = 1024  # the engines that decode
Options = tuple[tuple[str, Any], ...]


# --- which half of a checkpoint each implementation reads --------------------------------------


def checkpoint_format(path: str, impl: str) -> dict[str, str]:
    """vLLM options choosing which half of a two-format checkpoint an implementation reads.

    A folder with Mistral's format (params.json, consolidated.safetensors) beside the
    Transformers one, as mistralai/Voxtral-Mini-3B-2507 holds: vLLM would pick the Mistral half
    for both. Native vLLM reads it (with mistral-common's tokenizer); the backend serves the
    Transformers half, so it is told to.
    """
    folder = Path(path)
    if not all((folder / name).is_file()
               for name in ("params.json", "consolidated.safetensors", "config.json")):
        return {}
    if impl == NATIVE:
        return {"tokenizer_mode": "mistral", "config_format": "mistral", "load_format": "mistral"}
    return {"config_format": "hf", "load_format": "safetensors"}


def model_options(path: str, impl: str) -> dict[str, str]:
    """The `checkpoint_format` options a `ModelConfig` takes."""
    return {k: v for k, v in checkpoint_format(path, impl).items() if k != "load_format"}


def load_options(path: str, impl: str) -> dict[str, str]:
    """The `checkpoint_format` options a `LoadConfig` takes."""
    return {k: v for k, v in checkpoint_format(path, impl).items() if k == "load_format"}


# --- configs, processors, engines --------------------------------------------------------------


def model_config(path: str, impl: str, limits: Mapping[str, int], *, options: Options = (),
                 max_model_len: int = MAX_MODEL_LEN, cache_gb: float = 0, **overrides: Any):
    """vLLM's `ModelConfig`; `options` are model-level processor options
    (`mm_processor_kwargs`, as a deployment sets them); `cache_gb` sizes the processor cache."""
    from vllm.config import ModelConfig

    return ModelConfig(
        **model_options(path, impl),
        model=path,
        model_impl=impl,
        max_model_len=max_model_len,
        limit_mm_per_prompt=dict(limits),
        mm_processor_kwargs=dict(options) or None,
        mm_processor_cache_gb=cache_gb,
        **overrides,
    )


def model_config_for_loading(path: str, impl: str, limits: Mapping[str, int], dtype: str):
    """The `ModelConfig` of a model that is loaded (the model checks'), as `engine` makes it."""
    return model_config(path, impl, limits, max_model_len=ENGINE_MAX_MODEL_LEN, dtype=dtype,
                        enforce_eager=True, seed=0)


def vllm_config(path: str, impl: str, limits: Mapping[str, int], device: str, dtype: str) -> Any:
    """A `VllmConfig` for loading the model without an engine."""
    from vllm.config import DeviceConfig, LoadConfig, VllmConfig

    return VllmConfig(model_config=model_config_for_loading(path, impl, limits, dtype),
                      device_config=DeviceConfig(device=device),
                      load_config=LoadConfig(**load_options(path, impl)))


def processor_from(config: Any) -> Any:
    """vLLM's multimodal processor for a `ModelConfig`, made through the registry as the engine
    makes it."""
    from vllm.multimodal import MULTIMODAL_REGISTRY

    return MULTIMODAL_REGISTRY.create_processor(config)


def create_processor(path: str, impl: str, limits: Mapping[str, int], **config: Any) -> Any:
    """The processor of `model_config(path, impl, limits, **config)`."""
    return processor_from(model_config(path, impl, limits, **config))


def engine(path: str, impl: str, limits: Mapping[str, int], *, dtype: str | None = None,
           max_model_len: int = ENGINE_MAX_MODEL_LEN) -> Any:
    """An in-process `LLM` with one sequence, a small KV cache and no processor cache."""
    from vllm import LLM

    return LLM(
        **checkpoint_format(path, impl),
        model=path,
        model_impl=impl,
        max_model_len=max_model_len,
        max_num_seqs=1,
        max_num_batched_tokens=max_model_len,
        enforce_eager=True,
        limit_mm_per_prompt=dict(limits),
        kv_cache_memory_bytes=32 * 1024 * 1024,
        mm_processor_cache_gb=0,
        seed=0,
        **({} if dtype is None else {"dtype": dtype}),
    )


# --- vLLM's output as impl's dataclass ---------------------------------------------------------


def placeholder_from_range(offset: int, length: int, is_embed) -> Placeholder:
    """A vLLM PlaceholderRange; its `is_embed=None` means every position carries an embedding."""
    return placeholder_from_mask(offset, None if is_embed is None else is_embed.tolist(), length)


def from_vllm_output(out: Any) -> ProcessedPrompt:
    """A vLLM processor's output: ids, placeholders, per-item fields and hashes."""
    placeholders = {
        modality: tuple(placeholder_from_range(r.offset, r.length, r.is_embed) for r in ranges)
        for modality, ranges in out["mm_placeholders"].items()
    }
    fields = {
        modality: [item.get_data() if item is not None else {} for item in items]
        for modality, items in out["mm_kwargs"].items()
    }
    hashes = {m: tuple(h) for m, h in (out.get("mm_hashes") or {}).items()}
    return ProcessedPrompt(tuple(out["prompt_token_ids"]), placeholders, fields, hashes)


def apply(processor: Any, prompt: str | list[int], mm_data: dict, cache: Any = None) -> Any:
    """vLLM's processed inputs (raw) for one prompt."""
    return processor(prompt, processor.info.parse_mm_data(mm_data), cache=cache)


# --- the subjects ------------------------------------------------------------------------------


class VllmSubject:
    """A vLLM multimodal processor (`vllm-backend` or `vllm-native`), created as the engine would.

    A case's processor options are model-level (`LLM(mm_processor_kwargs=...)`, how a
    deployment sets them), so each distinct set gets its own `ModelConfig` and processor; impl
    and the HF oracle take them the same way.
    """

    def __init__(self, name: str, model_impl: str, path: str, recipe: Any):
        self.name, self.model_impl, self.path, self.recipe = name, model_impl, path, recipe
        self._processors: dict[Options, Any] = {}

    def model_config(self, options: Options = ()) -> Any:
        # `cache_gb` sizes the cache `new_cache` makes; `process` uses none unless given one.
        return model_config(self.path, self.model_impl,
                            {m: MAX_ITEMS for m in self.recipe.modalities}, options=options,
                            cache_gb=4)

    def processor_for(self, options: Options = ()) -> Any:
        if options not in self._processors:
            self._processors[options] = processor_from(self.model_config(options))
        return self._processors[options]

    @property
    def processor(self) -> Any:
        return self.processor_for()

    def hf_processor(self) -> Any:
        return self.processor.info.get_hf_processor()

    def new_cache(self, options: Options = ()) -> Any:
        from vllm.multimodal.cache import MultiModalProcessorOnlyCache

        return MultiModalProcessorOnlyCache(self.model_config(options))

    def process(self, case: Case, *, cache: Any = None, as_tokens: bool = False) -> ProcessedPrompt:
        processor = self.processor_for(case.processor_kwargs)
        prompt: str | list[int] = case.prompt(self.recipe.placeholder[case.modality])
        if as_tokens:
            tokenizer = processor.info.get_tokenizer()
            prompt = tokenizer.encode(prompt, add_special_tokens=self.recipe.add_special_tokens)
        return from_vllm_output(apply(processor, prompt, case.mm_data(), cache))
