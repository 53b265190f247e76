"""The one vLLM adapter: every `ModelConfig`, processor and engine the harness makes, and the
one conversion of vLLM's processor output into impl's `ProcessedPrompt`.

The same checkpoint is served two ways, differing only in `model_impl`: "vllm" (the native
model, the oracle) and "transformers" (the backend under test). Subjects, oracles and the
model checks all come through here, so they see the checkpoint the same way.
"""

from __future__ import annotations

import functools
import gc
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conformance.core import vllms
from conformance.core.subjects import VLLM_BACKEND, VLLM_NATIVE
from conformance.inputs.cases import Case
from conformance.inputs.forms import form_inputs, options_key
from conformance.subjects import kernels
from conformance.subjects.protocol import CACHE, HF_PROCESSOR, IMAGE_ROWS, VIDEO
from impl.types import Placeholder, ProcessedPrompt, placeholder_from_mask

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

NATIVE, BACKEND = "vllm", "transformers"  # vLLM `model_impl` values
IMPLS = (NATIVE, BACKEND)
# The harness's caps. Nothing a checkpoint derives is ever raised to them: vLLM lowers the items
# per prompt to the processor's own limit (`item_limits`), and every length is the checkpoint's
# own (vLLM derives it: `derived_max_model_len`), capped where the harness needs it.
MAX_ITEMS = 8  # items of each modality a prompt may hold (limit_mm_per_prompt)
ENGINE_MAX_MODEL_LEN = 1024  # the engines that decode, on CPU: tiny models, KV cache in RAM
GPU_ENGINE_MAX_MODEL_LEN = 8192  # on a GPU: room for real checkpoints' prompts
MIN_KV_CACHE_BYTES = 32 * 1024 * 1024
KV_CACHE_SHARE = 0.25  # at most this share of the device's free memory goes to one KV cache
Options = tuple[tuple[str, Any], ...]
# Items of each modality a prompt may hold (limit_mm_per_prompt): a count, or vLLM's dummy
# options for profiling with their count ({"count": 1, "width": 64, "height": 64})
Limits = Mapping[str, int | Mapping[str, int]]


# --- which half of a checkpoint each implementation reads --------------------------------------


def checkpoint_format(path: str, impl: str) -> dict[str, str]:
    """vLLM options choosing which half of a two-format checkpoint an implementation reads.

    A folder with Mistral's format (params.json, consolidated.safetensors) beside the
    Transformers one, as mistralai/Voxtral-Mini-3B-2507 holds: vLLM would pick the Mistral half
    for both. Native vLLM reads it (with mistral-common's tokenizer); the backend serves the
    Transformers half, so it is told to.

    A Transformers-format folder whose only tokenizer is Mistral's tekken.json (no
    tokenizer.json), as mistralai/Voxtral-Mini-4B-Realtime-2602 holds: its processor takes
    only transformers' MistralCommonBackend, which vLLM passes it with tokenizer_mode
    "mistral" (with its default mode the processor does not load), so both are told to.
    """
    folder = Path(path)
    if not all((folder / name).is_file()
               for name in ("params.json", "consolidated.safetensors", "config.json")):
        if ((folder / "config.json").is_file() and (folder / "tekken.json").is_file()
                and not (folder / "tokenizer.json").is_file()
                and not (folder / "params.json").is_file()):
            return {"tokenizer_mode": "mistral"}
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


def model_config(path: str, impl: str, limits: Limits, *, options: Options = (),
                 max_model_len: int | None = None, cache_gb: float = 0, **overrides: Any):
    """vLLM's `ModelConfig`; `options` are model-level processor options
    (`mm_processor_kwargs`, as a deployment sets them); `cache_gb` sizes the processor cache.
    `max_model_len=None`: what vLLM derives from the checkpoint, as when serving it with its
    defaults (processing sizes nothing from it)."""
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


def default_model_config(path: str, impl: str | None = None) -> Any:
    """The `ModelConfig` of `vllm serve PATH` with every default (`model_impl` "auto" unless
    given): what vLLM itself accepts, before any setting of the harness's."""
    from vllm.config import ModelConfig

    return ModelConfig(**model_options(path, impl or NATIVE), model=path,
                       **({"model_impl": impl} if impl else {}))


@functools.cache
def derived_config(path: str, impl: str) -> Any:
    """The `ModelConfig` with the length vLLM derives from the checkpoint (its config's
    position limit, the tokenizer's model_max_length, RoPE scaling, the sliding window)."""
    return model_config(path, impl, {})


def derived_max_model_len(path: str, impl: str) -> int:
    return int(derived_config(path, impl).max_model_len)


@dataclass(frozen=True)
class EngineSettings:
    """What an engine that decodes (and a model loaded without one) is given: derived from the
    checkpoint (its context length, its KV cache per token) and the machine."""

    max_model_len: int
    kv_cache_memory_bytes: int


def kv_bytes_per_token(config: Any, dtype: str | None) -> int:
    """K and V of every layer for one token (an upper bound where vLLM's count fails)."""
    import torch
    from vllm.config import ParallelConfig

    size = (getattr(torch, dtype) if dtype else config.dtype).itemsize
    try:
        parallel = ParallelConfig()
        per_layer = config.get_num_kv_heads(parallel) * config.get_head_size()
        return 2 * config.get_num_layers(parallel) * per_layer * size
    except Exception:  # hybrid or unusual layouts: every layer as wide as the model
        text = config.hf_text_config
        return 2 * getattr(text, "num_hidden_layers", 64) * 2 * text.hidden_size * size


def free_memory_bytes() -> int:
    """Free memory of the device engines run on (vLLM's platform: a GPU, else this host)."""
    from vllm.platforms import current_platform

    if current_platform.is_cuda_alike():
        import torch

        return int(torch.cuda.mem_get_info()[0])
    import psutil

    return int(psutil.virtual_memory().available)


@functools.cache
def engine_settings(path: str, impl: str, dtype: str | None = None) -> EngineSettings:
    """The checkpoint's own context length capped by the harness's (a small KV cache: the
    checks' prompts are short), and a KV cache of twice what that length needs, within a
    share of the machine's free memory (a shorter length where that share is too small)."""
    from vllm.platforms import current_platform

    cap = ENGINE_MAX_MODEL_LEN if current_platform.is_cpu() else GPU_ENGINE_MAX_MODEL_LEN
    length = min(cap, derived_max_model_len(path, impl))
    per_token = kv_bytes_per_token(derived_config(path, impl), dtype)
    budget = int(KV_CACHE_SHARE * free_memory_bytes())
    if 2 * per_token * length > budget:
        length = max(16, budget // (2 * per_token) // 16 * 16)
    return EngineSettings(length, max(MIN_KV_CACHE_BYTES, 2 * per_token * length))


def model_config_for_loading(path: str, impl: str, limits: Mapping[str, int], dtype: str):
    """The `ModelConfig` of a model that is loaded (the model checks'), as `engine` makes it."""
    return model_config(path, impl, limits,
                        max_model_len=engine_settings(path, impl, dtype).max_model_len,
                        dtype=dtype, enforce_eager=True, seed=0)


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


def create_processor(path: str, impl: str, limits: Limits, **config: Any) -> Any:
    """The processor of `model_config(path, impl, limits, **config)`."""
    return processor_from(model_config(path, impl, limits, **config))


def engine_unavailable(device: str) -> str | None:
    """Why the vLLM this process imports cannot start an engine on `device` (None: it can): a
    property of its build on this machine, not of a checkpoint. vLLM 0.33.0's wheel (CUDA
    only) over a CPU environment infers no platform ('Failed to infer device type'); a CPU
    platform whose build has no kernels this CPU runs cannot start its worker (vLLM picks
    them, `kernels.py`)."""
    from vllm.platforms import current_platform

    build = f"vLLM {vllms.current_label()}'s build"
    if not current_platform.device_type:
        return (f"{build} has no platform for this machine ({type(current_platform).__name__}): "
                "its engine cannot start here; its processing is tested, not its models")
    if device == "cpu" and not current_platform.is_cpu():
        return f"{build} runs on {current_platform.device_type}, not on the CPU"
    if device == "cpu" and (reason := kernels.probe().reason):
        return f"{build}: {reason}"
    return None


def engine(path: str, impl: str, limits: Mapping[str, int], *, dtype: str | None = None,
           runner: str = "auto", **options: Any) -> Any:
    """An in-process `LLM` with one sequence, a small KV cache (`engine_settings`), no
    processor cache and no prefix caching: the engine is shared by every model check of the
    checkpoint, and a KV block an earlier request of the same prompt left (another check, or
    the run before a planted fault) would stand in for the computation under test. `runner`:
    vLLM's ("pooling" for an embedding or classification checkpoint); `options`: further
    engine arguments (a pooling check's `pooler_config`)."""
    from vllm import LLM

    # An engine that failed or was dropped earlier may still await collection (cycles), and
    # collecting an engine tears down the process's distributed state: collect it before this
    # one sets that state up, never inside this engine's own steps.
    gc.collect()

    settings = engine_settings(path, impl, dtype)
    return LLM(
        **checkpoint_format(path, impl),
        model=path,
        model_impl=impl,
        max_model_len=settings.max_model_len,
        max_num_seqs=1,
        max_num_batched_tokens=settings.max_model_len,
        enforce_eager=True,
        limit_mm_per_prompt=dict(limits),
        kv_cache_memory_bytes=settings.kv_cache_memory_bytes,
        mm_processor_cache_gb=0,
        enable_prefix_caching=False,
        seed=0,
        runner=runner,
        **({} if dtype is None else {"dtype": dtype}),
        **options,
    )


def item_limits(processor: Any) -> dict[str, int]:
    """Items of each modality a prompt may hold: the harness's cap lowered to the processor's
    own limit (`get_supported_mm_limits`), as vLLM lowers it."""
    return dict(processor.info.allowed_mm_limits)


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


def apply(processor: Any, prompt: str | list[int], mm_data: dict, cache: Any = None,
          request_kwargs: Mapping[str, Any] | None = None) -> Any:
    """vLLM's processed inputs (raw) for one prompt; `request_kwargs` are the request's own
    processor options (its `mm_processor_kwargs`, which the renderer hands the processor as
    `hf_processor_mm_kwargs`)."""
    return processor(prompt, processor.info.parse_mm_data(mm_data),
                     hf_processor_mm_kwargs=dict(request_kwargs or {}), cache=cache)


# --- the subjects ------------------------------------------------------------------------------


def backend_takes_video(recipe: Any, path: str) -> bool:
    """Whether the suites give this fixture's backend video items: its architecture takes
    video, video can be compared on this vLLM and transformers (`vllms.video_comparable`), and
    the backend of the vLLM under test says it takes video for the checkpoint at `path`."""
    import transformers

    return (bool(getattr(recipe, "takes_video", False))
            and vllms.video_comparable(vllms.current_label(), transformers.__version__)
            and "video" in backend_modalities(path))


@functools.cache
def backend_modalities(path: str) -> frozenset[str]:
    """The modalities the Transformers backend of the installed vLLM serves for the checkpoint
    at `path` on the installed transformers: what its processing info reports to the engine
    (`get_supported_mm_limits`). Asked of the backend, not written down per release: vLLM 0.31.0
    reports no video on any transformers, 0.32.0 reports it from 5.18.0 for a processor with a
    video processor that counts its tokens. None where the backend cannot be made."""
    try:
        processor = create_processor(path, BACKEND, {})
        return frozenset(processor.info.get_supported_mm_limits())
    except Exception:  # noqa: BLE001 - the cells report why the backend cannot be made
        return frozenset()


class VllmSubject:
    """A vLLM multimodal processor (`vllm-backend` or `vllm-native`), created as the engine would.

    A case's processor options are model-level (`LLM(mm_processor_kwargs=...)`, how a
    deployment sets them), so each distinct set gets its own `ModelConfig` and processor; impl
    and the HF oracle take them the same way. `process(..., request_kwargs=...)` gives options
    per request as well (a request's `mm_processor_kwargs`), over the case's model-level ones.
    """

    capabilities = frozenset({HF_PROCESSOR, CACHE, IMAGE_ROWS})  # and VIDEO where it takes it

    def __init__(self, name: str, model_impl: str, path: str, recipe: Any):
        self.name, self.model_impl, self.path, self.recipe = name, model_impl, path, recipe
        # by checkpoint folder and options (`options_key`: a scoped form's values are dicts)
        self._processors: dict[tuple[str, str], Any] = {}
        # one `ModelConfig` per options: each new cache (the cache check makes several per
        # example) would otherwise re-read and re-validate the checkpoint's config (~60 ms)
        self._configs: dict[tuple[str, str], Any] = {}
        # Video items where the backend under test takes the fixture's videos (native vLLM,
        # its oracle, is then asked for them too); no limit for video otherwise.
        self.video = backend_takes_video(recipe, path)
        self.modalities = tuple(recipe.modalities) + (("video",) if self.video else ())
        if self.video:
            self.capabilities = VllmSubject.capabilities | {VIDEO}

    def model_config(self, options: Options = (), path: str | None = None) -> Any:
        """`path`: another checkpoint folder (an option form's copy of this one)."""
        # `cache_gb` sizes the cache `new_cache` makes; `process` uses none unless given one.
        key = (path or self.path, options_key(options))
        if key not in self._configs:
            self._configs[key] = model_config(
                path or self.path, self.model_impl, {m: MAX_ITEMS for m in self.modalities},
                options=options, cache_gb=4)
        return self._configs[key]

    def processor_for(self, options: Options = (), path: str | None = None) -> Any:
        key = (path or self.path, options_key(options))
        if key not in self._processors:
            self._processors[key] = processor_from(self.model_config(options, path))
        return self._processors[key]

    @property
    def processor(self) -> Any:
        return self.processor_for()

    def hf_processor(self) -> Any:
        return self.processor.info.get_hf_processor()

    def new_cache(self, options: Options = ()) -> Any:
        from vllm.multimodal.cache import MultiModalProcessorOnlyCache

        return MultiModalProcessorOnlyCache(self.model_config(options))

    def attributes_image_rows(self) -> bool:
        """Whether this processor derives each image's rows itself (the backend's Offsets
        path: `_get_num_image_patches`), rather than taking the processor's expansion."""
        return hasattr(self.processor, "_get_num_image_patches")

    def image_row_layout(self, case: Case, hf_inputs: Mapping[str, Any]
                         ) -> tuple[list[int], int | None]:
        """Each image's rows of image data and the dimension they lie along, as the backend
        derives them from the HF processor's outputs `hf_inputs` for the case's images: its
        own unpadding, count and slice dimension, without the check that they add up (that
        check raises before anything could be compared)."""
        import torch
        from transformers import BatchFeature

        # lazy: impl.fields imports torch (+1.1 s), kept out of importing the subjects package
        from impl.fields import image_data

        processor = self.processor_for(case.processor_kwargs)
        inputs = BatchFeature(dict(hf_inputs))
        processor._unpad_images(inputs)
        data = image_data(inputs)
        counted = {k: v for k, v in inputs.items() if k not in ("pixel_values", "image_patches")}
        rows = processor._get_num_image_patches(counted, {"images": case.items()},
                                                len(case.media))
        dim = (processor._get_slice_dim(data, int(rows.sum()))
               if isinstance(data, torch.Tensor) else None)
        return [int(n) for n in rows.tolist()], dim

    def process(self, case: Case, *, cache: Any = None, as_tokens: bool = False,
                request_kwargs: Mapping[str, Any] | None = None, form: str = ""
                ) -> ProcessedPrompt:
        """`form`: the case's options given in that form (`conformance.inputs.forms`) instead
        of model-flat: model-level scoped, per request, or on disk in a copy of the checkpoint
        (its own deployment); `request_kwargs` go over them."""
        given = form_inputs(form, case.processor_kwargs, case.modality, self.path)
        processor = self.processor_for(given.model, given.path)
        prompt: str | list[int] = case.prompt(self.recipe.placeholder)
        if as_tokens:
            tokenizer = processor.info.get_tokenizer()
            prompt = tokenizer.encode(prompt, add_special_tokens=self.recipe.add_special_tokens)
        request = {**given.request, **dict(request_kwargs or {})}
        return from_vllm_output(apply(processor, prompt, case.mm_data(), cache, request))


class BackendSubject(VllmSubject):
    """vLLM's Transformers backend (`model_impl="transformers"`): the subject under test."""

    def __init__(self, path: str, recipe: Any):
        super().__init__(VLLM_BACKEND, BACKEND, path, recipe)


class NativeSubject(VllmSubject):
    """vLLM's native processor for the architecture: the oracle."""

    def __init__(self, path: str, recipe: Any):
        super().__init__(VLLM_NATIVE, NATIVE, path, recipe)
