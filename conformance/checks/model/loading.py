"""Models loaded once per process: vLLM's native and backend models, the HF model, engines.

Keyed by (kind, path, impl, transformers version, device, dtype) in `CACHE`. Encoder and
M-RoPE checks build vLLM's own model classes with vLLM's weight loading but without an engine
(`get_model`), several times faster than `LLM(...)`; decoding needs the engine's scheduler and
KV cache, so `generate` uses `LLM(...)` (and the others reuse an engine that already exists).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from conformance.core import heap
from conformance.subjects import vllm
from conformance.subjects.vllm import BACKEND, MAX_ITEMS, NATIVE
from fixtures.recipe import Recipe

HF = "hf"  # the plain transformers model impl drives


@dataclass
class VllmModel:
    """A vLLM model class with its weights loaded, its config and its own processor."""

    model: Any
    vllm_config: Any
    processor: Any
    engine: Any = None  # the `LLM` it was taken from, if any


@dataclass
class ModelCache:
    """Everything loaded, keyed by (kind, path, impl, transformers version, device, dtype);
    `seconds` records how long each entry took to build (its cold start)."""

    entries: dict[tuple, Any] = field(default_factory=dict)
    seconds: dict[tuple, float] = field(default_factory=dict)

    def get(self, key: tuple, build: Callable[[], Any]) -> Any:
        if key not in self.entries:
            started = time.perf_counter()
            self.entries[key] = build()
            self.seconds[key] = time.perf_counter() - started
        return self.entries[key]

    def drop(self, kind: str | None = None, key: tuple | None = None) -> None:
        """Forget entries (all, one kind, or one key), shutting their engines down now. An
        engine's shutdown tears down the process's distributed state, which `ensure_distributed`
        sets up again on next use; left to the garbage collector (an exception's traceback
        keeps a failed engine alive, and vLLM's engine freezes the objects it was built among),
        it ran at an arbitrary later point, in the middle of another fixture's model build
        ('tensor model parallel group is not initialized': which cells a worker ran before
        decided the verdict)."""
        import gc

        for k in [k for k in self.entries
                  if (kind is None or k[0] == kind) and (key is None or k == key)]:
            shut_down(self.entries.pop(k))
        gc.collect()
        heap.freeze()  # vLLM's shutdown unfroze the heap: what is left, frozen again


def shut_down(entry: Any) -> None:
    """Shut down the in-process engine of a cache entry (an `LLM`, or a model taken out of
    one) once and now: its client's shutdown disarms the finalizer that would run it again."""
    engine = entry if hasattr(entry, "llm_engine") else getattr(entry, "engine", None)
    client = getattr(getattr(engine, "llm_engine", None), "engine_core", None)
    if client is not None and hasattr(client, "shutdown"):
        with contextlib.suppress(Exception):  # a half-built engine: nothing more to release
            client.shutdown()


CACHE = ModelCache()
# True: the engine-free checks take their models out of `LLM(...)` engines, so one engine per
# implementation serves all three checks; False: they load engine-free (faster), and an engine
# that already exists is still reused.
PREFER_LLM = os.environ.get("MODELCHECKS_PREFER_LLM", "") == "1"


def cache_key(kind: str, path: str, impl: str, device: str, dtype: str) -> tuple:
    import transformers

    return (kind, str(path), impl, transformers.__version__, device, dtype)


def limits_for(recipe: Recipe) -> dict[str, int]:
    return {modality: MAX_ITEMS for modality in recipe.modalities}


def ensure_distributed() -> None:
    """A single-process group, as a vLLM worker sets up (and `LLM` reuses once it exists),
    with an expert-parallel group whatever model comes first: vLLM makes that group only when
    the config current at set-up time has no model or an MoE one, and a worker loads dense and
    MoE fixtures in any order (a dense model's groups, made first, fail the MoE model loaded
    next: 'expert parallel group is not initialized')."""
    import torch
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed import parallel_state
    from vllm.platforms import current_platform

    if parallel_state.model_parallel_is_initialized():
        if getattr(parallel_state, "_EP", None) is not None:
            return
        parallel_state.destroy_model_parallel()  # made for a dense model: made again
    # the groups read the parallel sizes and the model from the current config: a default
    # one has every size 1 and no model, so the expert group is made too
    with set_current_vllm_config(VllmConfig()):
        if not torch.distributed.is_initialized():
            folder = tempfile.mkdtemp(prefix="modelchecks-dist-")
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            init = f"file://{folder}/store"
            parallel_state.init_distributed_environment(1, 0, init, 0,
                                                        current_platform.dist_backend)
        parallel_state.initialize_model_parallel(1, 1)


def prepare(engine: bool = False) -> float:
    """Import what loading needs and set up the process group, so a model's cold start is
    measured without the one-off cost; returns the seconds it took."""
    import importlib

    started = time.perf_counter()
    from vllm.platforms import current_platform

    modules = ["transformers", "vllm.config", "vllm.distributed", "vllm.multimodal",
               "vllm.multimodal.utils", "vllm.model_executor.model_loader"]
    if engine:
        worker = "cpu_worker" if current_platform.is_cpu() else "gpu_worker"
        modules += ["vllm.entrypoints.llm", "vllm.v1.engine.llm_engine", "vllm.v1.engine.core",
                    "vllm.v1.executor.uniproc_executor", f"vllm.v1.worker.{worker}"]
    for module in modules:
        importlib.import_module(module)
    ensure_distributed()
    return time.perf_counter() - started


def build_vllm_model(path: str, impl: str, limits: dict[str, int], device: str,
                     dtype: str) -> VllmModel:
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model

    config = vllm.vllm_config(path, impl, limits, device, dtype)
    with set_current_vllm_config(config):
        ensure_distributed()
        model = get_model(vllm_config=config).eval()
    processor = vllm.processor_from(config.model_config)
    return VllmModel(model, config, processor)


def model_of_llm(engine: Any) -> VllmModel:
    """The model inside an in-process engine (VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    (model,) = engine.apply_model(lambda m: m)
    config = engine.llm_engine.vllm_config
    return VllmModel(model, config, vllm.processor_from(config.model_config), engine)


def vllm_model(recipe: Recipe, path: str, impl: str, device: str = "cpu",
               dtype: str = "float32") -> VllmModel:
    """vLLM's model for `impl` ("vllm" native, "transformers" backend): the cached engine's
    when there is one (or PREFER_LLM), else loaded engine-free."""
    key = cache_key("model", path, impl, device, dtype)
    if key not in CACHE.entries and (
            PREFER_LLM or cache_key("llm", path, impl, device, dtype) in CACHE.entries):
        return CACHE.get(key, lambda: model_of_llm(llm(recipe, path, impl, device, dtype)))
    return CACHE.get(key, lambda: build_vllm_model(path, impl, limits_for(recipe), device, dtype))


def build_hf_model(path: str, device: str, dtype: str, cls: Any = None) -> Any:
    """The HF model of checkpoint `path`: by default the base model (`AutoModel`), which is
    what the backend wraps and calls into; `cls`: another class (the HF reference's, with
    its head)."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the load report lists the unused lm_head
    try:
        with hf_init_context(path):
            if cls is not None:
                model = cls.from_pretrained(path, dtype=getattr(torch, dtype))
            else:
                model = base_model_from_pretrained(AutoModel, path, dtype=getattr(torch, dtype))
    finally:
        hf_logging.set_verbosity(verbosity)
    return model.to(device).eval()


# The hub layout's prefix of the base model inside a ...ForConditionalGeneration checkpoint
BASE_MODEL_PREFIX = {r"^model\.": ""}


def base_model_from_pretrained(auto: Any, path: str, **kwargs: Any) -> Any:
    """The base model with the checkpoint's weights. A base model class whose
    `base_model_prefix` is "" (transformers' LightOnOcrModel) cannot strip the hub layout's
    `model.` prefix: `AutoModel.from_pretrained` reports every weight missing and initialises
    them at random. Only then, loading again with that prefix mapped away; kept only where it
    leaves fewer weights missing (the backend loads such checkpoints through its own mapper)."""
    model, info = auto.from_pretrained(path, output_loading_info=True, **kwargs)
    if not info["missing_keys"]:
        return model
    mapped, mapped_info = auto.from_pretrained(
        path, output_loading_info=True, key_mapping=BASE_MODEL_PREFIX, **kwargs
    )
    return mapped if len(mapped_info["missing_keys"]) < len(info["missing_keys"]) else model


@contextlib.contextmanager
def hf_init_context(path: str) -> Iterator[None]:
    """Where a transformers model of checkpoint `path` may be instantiated. Loading the backend
    decorates transformers' model classes process-wide (vLLM's torch.compile wrapper), whose
    __init__ then needs a current vLLM config describing a model; with compilation off the
    wrapper only forwards. (Building a fixture checkpoint after the backend has loaded fails
    the same way, so build fixtures before loading models.)"""
    from vllm.config import get_current_vllm_config_or_none, set_current_vllm_config

    if get_current_vllm_config_or_none() is not None:
        yield
        return
    with set_current_vllm_config(any_vllm_config(path)):
        yield


def any_vllm_config(path: str) -> Any:
    """A VllmConfig for `path`: native's, else the backend's (each fails on some models)."""
    try:
        return vllm.vllm_config(path, NATIVE, {}, "cpu", "float32")
    except Exception:
        return vllm.vllm_config(path, BACKEND, {}, "cpu", "float32")


def hf_model(path: str, device: str = "cpu", dtype: str = "float32") -> Any:
    return CACHE.get(cache_key("hf", path, HF, device, dtype),
                     lambda: build_hf_model(path, device, dtype))


def llm(recipe: Recipe, path: str, impl: str, device: str = "cpu",
        dtype: str = "float32") -> Any:
    """The engine (`LLM`), for decoding; the device is the platform's."""
    def make() -> Any:
        ensure_distributed()  # else the engine's worker makes the groups for its model alone
        return vllm.engine(path, impl, limits_for(recipe), dtype=dtype, runner=recipe.runner)

    return CACHE.get(cache_key("llm", path, impl, device, dtype), make)


def native_config(recipe: Recipe, path: str) -> Any:
    """Native vLLM's ModelConfig, for what it says about the model without loading it."""
    return CACHE.get(cache_key("config", path, NATIVE, "cpu", "float32"),
                     lambda: vllm.model_config_for_loading(path, NATIVE, limits_for(recipe),
                                                        "float32"))


def native_limit(recipe: Recipe, path: str, modality: str) -> int | None:
    """Items of `modality` native vLLM takes per prompt (None: no limit of its own)."""
    from vllm.multimodal import MULTIMODAL_REGISTRY

    info = MULTIMODAL_REGISTRY.get_processing_info(native_config(recipe, path))
    return info.get_supported_mm_limits().get(modality)
