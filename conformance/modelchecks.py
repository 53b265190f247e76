"""Model-level parity: vLLM's Transformers backend (and impl driving the HF model) against native
vLLM on one checkpoint.

- `check_encoder`: per-item multimodal embeddings of the backend model and of impl on the HF
  model equal the native model's `embed_multimodal`, compared item by item after splitting;
- `check_mrope`: M-RoPE positions and decode delta of the backend model (and of impl on the HF
  model) equal the native model's, on prompts with several images in varied places;
- `check_generate`: a few greedy tokens with logprobs agree under vLLM tests'
  `check_logprobs_close` rule.

Each check is `(recipe, path, **options) -> (evidence or None, data)`; `data` always holds the
measured distances. Models are loaded once per (checkpoint, implementation, transformers
version, device, dtype) and kept in `CACHE`. Encoder and M-RoPE checks build vLLM's own model
classes with vLLM's weight loading but without an engine (`get_model`), which is several times
faster than `LLM(...)`; decoding needs the engine's scheduler and KV cache, so `check_generate`
uses `LLM(...)`.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from conformance import oracle  # noqa: E402
from conformance.media import make_items  # noqa: E402
from fixtures.recipe import Recipe  # noqa: E402

MODEL_CHECKS = ("encoder", "mrope", "generate")
NATIVE, BACKEND = "vllm", "transformers"  # vLLM `model_impl` values
HF = "hf"  # the plain transformers model impl drives
SUBJECTS = ("backend", "impl")  # compared against native vLLM
ITEMS_PER_PROMPT = 2
MAX_ITEMS = 8
MAX_MODEL_LEN = 1024
GENERATE_TOKENS = 4
TOP_LOGPROBS = 5

MediaHook = Callable[[list], list]  # applied to the subject's media only (planted faults)


class NotApplicable(Exception):  # noqa: N818 - a verdict, not an error
    """The check does not apply to this model (e.g. M-RoPE on a model without it)."""


# --- tolerances --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tolerance:
    """Per-item bounds; fp32 uses torch.allclose, lower precisions rel-L2 (and cosine), whose
    floors /work/shared/reference/gpu-noise-floor.md measured (bounds at twice the floor)."""

    atol: float | None = None
    rtol: float | None = None
    max_rel_l2: float | None = None
    min_cosine: float | None = None

    def describe(self) -> str:
        parts = []
        if self.atol is not None:
            parts.append(f"atol {self.atol:g} / rtol {self.rtol:g}")
        if self.max_rel_l2 is not None:
            parts.append(f"rel-L2 <= {self.max_rel_l2:g}")
        if self.min_cosine is not None:
            parts.append(f"cosine >= {self.min_cosine:g}")
        return ", ".join(parts)


TOLERANCES = {
    "float32": Tolerance(atol=1e-5, rtol=1e-4),
    "bfloat16": Tolerance(max_rel_l2=0.025, min_cosine=0.9998),
    "float16": Tolerance(max_rel_l2=0.003),
}


def tolerance_for(dtype: str) -> Tolerance:
    name = str(dtype).removeprefix("torch.")
    name = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16",
            "float": "float32"}.get(name, name)
    if name not in TOLERANCES:
        raise ValueError(f"no tolerance for dtype {dtype!r} (known: {', '.join(TOLERANCES)})")
    return TOLERANCES[name]


@dataclass(frozen=True)
class Distance:
    max_abs: float
    rel_l2: float
    cosine: float
    allclose: bool

    def as_dict(self) -> dict[str, float | bool]:
        return {"max_abs": self.max_abs, "rel_l2": self.rel_l2, "cosine": self.cosine,
                "allclose": self.allclose}

    def describe(self) -> str:
        return f"max abs {self.max_abs:.3g}, rel-L2 {self.rel_l2:.3g}, cosine {self.cosine:.6f}"


def measure(actual: Any, expected: Any, tolerance: Tolerance) -> Distance:
    """Distances in float64 on the CPU; `allclose` only where the tolerance has atol/rtol."""
    import torch

    a = actual.detach().to("cpu", torch.float64).flatten()
    e = expected.detach().to("cpu", torch.float64).flatten()
    norm = float(e.norm())
    diff = a - e
    rel_l2 = float(diff.norm()) / norm if norm else float(diff.norm())
    denom = float(a.norm()) * norm
    cosine = float(a @ e) / denom if denom else (1.0 if not diff.any() else 0.0)
    close = tolerance.atol is None or torch.allclose(a, e, rtol=tolerance.rtol,
                                                     atol=tolerance.atol)
    return Distance(float(diff.abs().max()) if diff.numel() else 0.0, rel_l2, cosine, close)


def exceeds(distance: Distance, tolerance: Tolerance) -> bool:
    if not distance.allclose or math.isnan(distance.rel_l2):
        return True
    if tolerance.max_rel_l2 is not None and distance.rel_l2 > tolerance.max_rel_l2:
        return True
    return tolerance.min_cosine is not None and distance.cosine < tolerance.min_cosine


def compare_items(modality: str, expected: Sequence[Any], actual: Sequence[Any],
                  tolerance: Tolerance) -> tuple[list[str], list[dict]]:
    """Per item: (problems naming the item, measured distances)."""
    problems: list[str] = []
    rows: list[dict] = []
    if len(expected) != len(actual):
        problems.append(f"native has {len(expected)} {modality} embeddings, this subject "
                        f"{len(actual)}")
    for index, (want, got) in enumerate(zip(expected, actual, strict=False)):
        where = f"{modality} item {index}"
        if tuple(want.shape) == tuple(got.shape):
            distance = measure(got, want, tolerance)
            rows.append({"item": index, "shape": list(got.shape), **distance.as_dict()})
            if exceeds(distance, tolerance):
                problems.append(f"{where}: {distance.describe()} (allowed {tolerance.describe()})")
            continue
        row = {"item": index, "shape": list(got.shape), "native_shape": list(want.shape)}
        problem = f"{where}: shape {tuple(got.shape)} vs native {tuple(want.shape)}"
        if leading_columns(want, got):
            # e.g. Qwen3-VL: native appends deepstack features after the main embedding
            distance = measure(got, want[..., : got.shape[-1]], tolerance)
            row["leading_columns"] = distance.as_dict()
            problem += f"; native's first {got.shape[-1]} columns: {distance.describe()}"
        rows.append(row)
        problems.append(problem)
    return problems, rows


def leading_columns(want: Any, got: Any) -> bool:
    """The native rows are wider by a whole multiple, the rest of the shape equal."""
    return (want.ndim == got.ndim >= 1 and want.shape[:-1] == got.shape[:-1]
            and got.shape[-1] > 0 and want.shape[-1] % got.shape[-1] == 0)


# --- loading, cached ---------------------------------------------------------------------------


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
        """Forget entries (all, one kind, or one key). A collected engine tears down the
        process's distributed state, which `ensure_distributed` sets up again on next use."""
        import gc

        for k in [k for k in self.entries
                  if (kind is None or k[0] == kind) and (key is None or k == key)]:
            del self.entries[k]
        gc.collect()


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


def model_config(path: str, impl: str, limits: dict[str, int], dtype: str) -> Any:
    return oracle.model_config(path, impl, limits, max_model_len=MAX_MODEL_LEN, dtype=dtype,
                               enforce_eager=True, seed=0)


def vllm_config_for(path: str, impl: str, limits: dict[str, int], device: str,
                    dtype: str) -> Any:
    from vllm.config import DeviceConfig, LoadConfig, VllmConfig

    return VllmConfig(model_config=model_config(path, impl, limits, dtype),
                      device_config=DeviceConfig(device=device),
                      load_config=LoadConfig(**oracle.load_options(path, impl)))


def ensure_distributed() -> None:
    """A single-process group, as a vLLM worker sets up (and `LLM` reuses once it exists)."""
    import torch
    from vllm.config import VllmConfig, get_current_vllm_config_or_none, set_current_vllm_config
    from vllm.distributed import parallel_state
    from vllm.platforms import current_platform

    if parallel_state.model_parallel_is_initialized():
        return
    # the groups read the parallel sizes from the current config; a default one has all 1
    current = get_current_vllm_config_or_none()
    with contextlib.ExitStack() as stack:
        if current is None:
            stack.enter_context(set_current_vllm_config(VllmConfig()))
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
    from vllm.multimodal import MULTIMODAL_REGISTRY

    config = vllm_config_for(path, impl, limits, device, dtype)
    with set_current_vllm_config(config):
        ensure_distributed()
        model = get_model(vllm_config=config).eval()
    processor = MULTIMODAL_REGISTRY.create_processor(config.model_config)
    return VllmModel(model, config, processor)


def model_of_llm(engine: Any) -> VllmModel:
    """The model inside an in-process engine (VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    from vllm.multimodal import MULTIMODAL_REGISTRY

    (model,) = engine.apply_model(lambda m: m)
    config = engine.llm_engine.vllm_config
    return VllmModel(model, config, MULTIMODAL_REGISTRY.create_processor(config.model_config),
                     engine)


def vllm_model(recipe: Recipe, path: str, impl: str, device: str = "cpu",
               dtype: str = "float32") -> VllmModel:
    """vLLM's model for `impl` ("vllm" native, "transformers" backend): the cached engine's
    when there is one (or PREFER_LLM), else loaded engine-free."""
    key = cache_key("model", path, impl, device, dtype)
    if key not in CACHE.entries and (
            PREFER_LLM or cache_key("llm", path, impl, device, dtype) in CACHE.entries):
        return CACHE.get(key, lambda: model_of_llm(llm(recipe, path, impl, device, dtype)))
    return CACHE.get(key, lambda: build_vllm_model(path, impl, limits_for(recipe), device, dtype))


def build_hf_model(path: str, device: str, dtype: str) -> Any:
    """The base model (`AutoModel`), which is what the backend wraps and calls into."""
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the load report lists the unused lm_head
    try:
        with hf_init_context(path):
            model = AutoModel.from_pretrained(path, dtype=getattr(torch, dtype))
    finally:
        hf_logging.set_verbosity(verbosity)
    return model.to(device).eval()


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
        return vllm_config_for(path, NATIVE, {}, "cpu", "float32")
    except Exception:
        return vllm_config_for(path, BACKEND, {}, "cpu", "float32")


def hf_model(path: str, device: str = "cpu", dtype: str = "float32") -> Any:
    return CACHE.get(cache_key("hf", path, HF, device, dtype),
                     lambda: build_hf_model(path, device, dtype))


def build_llm(path: str, impl: str, limits: dict[str, int], dtype: str) -> Any:
    from vllm import LLM

    return LLM(**oracle.checkpoint_format(path, impl),
               model=path, model_impl=impl, max_model_len=MAX_MODEL_LEN, max_num_seqs=1,
               max_num_batched_tokens=MAX_MODEL_LEN, enforce_eager=True,
               limit_mm_per_prompt=limits, kv_cache_memory_bytes=32 * 1024 * 1024,
               mm_processor_cache_gb=0, seed=0, dtype=dtype)


def llm(recipe: Recipe, path: str, impl: str, device: str = "cpu",
        dtype: str = "float32") -> Any:
    """The engine (`LLM`), for decoding; the device is the platform's."""
    return CACHE.get(cache_key("llm", path, impl, device, dtype),
                     lambda: build_llm(path, impl, limits_for(recipe), dtype))


# --- inputs ------------------------------------------------------------------------------------


def require_native(recipe: Recipe) -> None:
    if not recipe.native_in_vllm:
        raise NotApplicable(f"vLLM 0.31.0 has no native {recipe.architecture} to compare with")


def native_config(recipe: Recipe, path: str) -> Any:
    """Native vLLM's ModelConfig, for what it says about the model without loading it."""
    return CACHE.get(cache_key("config", path, NATIVE, "cpu", "float32"),
                     lambda: model_config(path, NATIVE, limits_for(recipe), "float32"))


def native_limit(recipe: Recipe, path: str, modality: str) -> int | None:
    """Items of `modality` native vLLM takes per prompt (None: no limit of its own)."""
    from vllm.multimodal import MULTIMODAL_REGISTRY

    info = MULTIMODAL_REGISTRY.get_processing_info(native_config(recipe, path))
    return info.get_supported_mm_limits().get(modality)


def two_item_inputs(recipe: Recipe, path: str) -> tuple[str, str, list]:
    """The recipe's prompt with two items (one where native vLLM takes only one)."""
    modality = recipe.modalities[0]
    limit = native_limit(recipe, path, modality)
    count = ITEMS_PER_PROMPT if limit is None else min(ITEMS_PER_PROMPT, limit)
    return modality, recipe.render_prompt(modality, count), make_items(modality, count)


def process(loaded: VllmModel, prompt: str, modality: str, items: list) -> Any:
    """vLLM's processed inputs (prompt ids, placeholders, per-item fields) for one prompt."""
    mm_data = oracle.as_mm_data(modality, items)
    return loaded.processor(prompt, loaded.processor.info.parse_mm_data(mm_data))


def items_in_prompt_order(out: Any) -> list[tuple[str, int, Any]]:
    """(modality, index, item) sorted by placeholder offset, as the engine schedules them."""
    from vllm.multimodal.utils import argsort_mm_positions

    return [(m, i, out["mm_kwargs"][m][i]) for m, i in argsort_mm_positions(out["mm_placeholders"])]


def embed(out: Any, device: str, run: Callable[..., Sequence[Any]]) -> dict[str, list]:
    """Per modality, one embedding per item: the items batched the way vLLM's model runner
    batches them (`group_and_batch_mm_kwargs`), each batch through `run`, output split."""
    import torch
    from vllm.multimodal.utils import group_and_batch_mm_kwargs

    ordered = items_in_prompt_order(out)
    outputs: list = []
    with torch.inference_mode():
        for modality, count, batch in group_and_batch_mm_kwargs(
                [(m, item) for m, _, item in ordered], device=device):
            got = list(run(**batch))
            if len(got) != count:
                shapes = [tuple(e.shape) for e in got]
                raise ValueError(f"a batch of {count} {modality} item(s) gave {len(got)} "
                                 f"embedding(s), of shapes {shapes}")
            outputs.extend(got)
    per_modality: dict[str, list] = {}
    for (modality, _, _), embedding in zip(ordered, outputs, strict=True):
        per_modality.setdefault(modality, []).append(embedding)
    return per_modality


def vllm_embed(loaded: VllmModel, out: Any, device: str) -> dict[str, list]:
    from vllm.config import set_current_vllm_config

    with set_current_vllm_config(loaded.vllm_config):
        ensure_distributed()  # a collected engine may have torn it down
        return embed(out, device, loaded.model.embed_multimodal)


def impl_embed(model: Any, out: Any, device: str) -> dict[str, list]:
    import impl.encoder

    return embed(out, device, lambda **kwargs: impl.encoder.embed_multimodal(model, **kwargs))


def error_text(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"


def summary(problems: Sequence[str], limit: int = 6) -> str | None:
    """The evidence: the first problems verbatim (data holds every measurement)."""
    if not problems:
        return None
    more = f"; and {len(problems) - limit} more" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more


# --- check_encoder -----------------------------------------------------------------------------


def check_encoder(recipe: Recipe, path: str, *, device: str = "cpu", dtype: str = "float32",
                  subject_media: MediaHook | None = None) -> tuple[str | None, dict]:
    """Per-item embeddings of the backend model and of impl on the HF model vs native vLLM.

    Each vLLM model gets its own processor's output for the recipe's two-item prompt (as when
    serving); impl is fed the backend's processed items. Items are compared by index within
    their modality, so prompt-id differences (gemma3's newlines) do not enter. A subject that
    raises is reported as evidence; the native oracle raising ends the check."""
    require_native(recipe)
    tolerance = tolerance_for(dtype)
    modality, prompt, items = two_item_inputs(recipe, path)
    subject_items = subject_media(list(items)) if subject_media else items
    native = vllm_model(recipe, path, NATIVE, device, dtype)
    expected = vllm_embed(native, process(native, prompt, modality, items), device)
    data: dict[str, Any] = {"tolerance": tolerance.describe(), "native": {
        m: [list(e.shape) for e in es] for m, es in expected.items()}}

    def backend_out() -> Any:
        return process(vllm_model(recipe, path, BACKEND, device, dtype), prompt, modality,
                       subject_items)

    runs: dict[str, Callable[[], dict[str, list]]] = {
        "backend": lambda: vllm_embed(vllm_model(recipe, path, BACKEND, device, dtype),
                                      backend_out(), device),
        "impl": lambda: impl_embed(hf_model(path, device, dtype), backend_out(), device),
    }
    problems: list[str] = []
    for subject, run in runs.items():
        try:
            actual = run()
        except Exception as error:  # one subject's failure is evidence, not the check's end
            data[subject] = {"error": error_text(error)}
            problems.append(f"{subject}: {error_text(error)}")
            continue
        data[subject] = {}
        for mod in sorted(set(expected) | set(actual)):
            found, rows = compare_items(mod, expected.get(mod, []), actual.get(mod, []),
                                        tolerance)
            data[subject][mod] = rows
            problems.extend(f"{subject} {p}" for p in found)
    return summary(problems), data


# --- check_mrope -------------------------------------------------------------------------------

MROPE_IMAGE_SIZES = ((28, 84), (84, 28), (56, 56), (28, 56))  # (h, w): distinct grids


def mrope_prompts(recipe: Recipe) -> list[tuple[str, str, int]]:
    """(description, prompt, images): several images, text between, images at start and end."""
    ph = recipe.placeholder["image"]
    return [
        ("recipe prompt, 2 images", recipe.render_prompt("image", 2), 2),
        ("images at start, middle and end", f"{ph} left of {ph} and right{ph}", 3),
        ("two adjacent images at the start", f"{ph}{ph} then text", 2),
        ("text then one image at the end", f"A question about {ph}", 1),
        ("four images between text", f"a {ph} b {ph} c {ph} d {ph} e", 4),
    ]


def mrope_images(count: int) -> list:
    from conformance.cases import Media

    return [Media("image", h, w, seed=i).materialise()
            for i, (h, w) in enumerate(MROPE_IMAGE_SIZES[:count])]


def feature_specs(out: Any) -> list[Any]:
    """The request's `mm_features`, built as vLLM's input processor builds them."""
    from vllm.multimodal.inputs import MultiModalFeatureSpec

    hashes = out.get("mm_hashes") or {}
    specs = []
    for modality, index, item in items_in_prompt_order(out):
        identifier = hashes.get(modality, [f"{modality}-{index}"] * (index + 1))[index]
        specs.append(MultiModalFeatureSpec(data=item, modality=modality, identifier=identifier,
                                           mm_position=out["mm_placeholders"][modality][index],
                                           mm_hash=identifier))
    return specs


def impl_mrope(model: Any, out: Any) -> tuple[Any, int]:
    import impl.mrope
    from conformance.oracle import from_vllm_output

    processed = from_vllm_output(out)
    return impl.mrope.mrope_input_positions(model, list(out["prompt_token_ids"]),
                                            impl.mrope.features_of(processed))


def compare_positions(expected: tuple[Any, int], actual: tuple[Any, int]) -> tuple[str | None,
                                                                                    dict]:
    (want, want_delta), (got, got_delta) = expected, actual
    if tuple(want.shape) != tuple(got.shape):
        return (f"positions shape {tuple(got.shape)} vs native {tuple(want.shape)}",
                {"shape": list(got.shape), "native_shape": list(want.shape)})
    wrong = (want != got).any(dim=0).nonzero().flatten().tolist()
    row = {"mismatched_positions": len(wrong),
           "max_abs": int((want - got).abs().max()) if want.numel() else 0,
           "delta": int(got_delta), "native_delta": int(want_delta)}
    if wrong:
        at = wrong[0]
        return (f"{len(wrong)} position(s) differ, first at token {at}: "
                f"{got[:, at].tolist()} vs native {want[:, at].tolist()}"), row
    if int(got_delta) != int(want_delta):
        return f"delta {got_delta} vs native {want_delta}", row
    return None, row


def check_mrope(recipe: Recipe, path: str, *, device: str = "cpu", dtype: str = "float32",
                subject_media: MediaHook | None = None) -> tuple[str | None, dict]:
    """Positions and delta from the backend's `get_mrope_input_positions` (and impl's
    `get_rope_index` driver on the HF model, fed the backend's processed prompt) equal the
    native model's, prompt by prompt; each model gets its own processor's output."""
    require_native(recipe)
    if not native_config(recipe, path).uses_mrope:
        raise NotApplicable(f"{recipe.architecture} does not use M-RoPE")
    if "image" not in recipe.modalities:
        raise NotApplicable(f"{recipe.name} exercises no images")
    native = vllm_model(recipe, path, NATIVE, device, dtype)
    problems: list[str] = []
    data: dict[str, Any] = {"prompts": []}
    limit = native_limit(recipe, path, "image")
    for description, prompt, count in mrope_prompts(recipe):
        if limit is not None and count > limit:
            continue
        images = mrope_images(count)
        subject_images = subject_media(list(images)) if subject_media else images
        native_out = process(native, prompt, "image", images)
        expected = native.model.get_mrope_input_positions(
            list(native_out["prompt_token_ids"]), feature_specs(native_out))
        row: dict[str, Any] = {"prompt": description,
                               "tokens": len(native_out["prompt_token_ids"])}
        for subject in SUBJECTS:
            try:
                got = subject_mrope(subject, recipe, path, subject_images, prompt, device, dtype)
                difference, row[subject] = compare_positions(expected, got)
            except Exception as error:  # one subject's failure is evidence
                difference, row[subject] = error_text(error), {"error": error_text(error)}
            if difference:
                problems.append(f"{subject} on {description!r}: {difference}")
        data["prompts"].append(row)
    return summary(problems), data


def subject_mrope(subject: str, recipe: Recipe, path: str, images: list, prompt: str,
                  device: str, dtype: str) -> tuple[Any, int]:
    backend = vllm_model(recipe, path, BACKEND, device, dtype)
    out = process(backend, prompt, "image", images)
    if subject == "impl":
        return impl_mrope(hf_model(path, device, dtype), out)
    return backend.model.get_mrope_input_positions(list(out["prompt_token_ids"]),
                                                   feature_specs(out))


# --- check_generate ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Decoded:
    prompt_ids: tuple[int, ...]
    tokens: tuple[int, ...]
    logprobs: tuple[dict[int, float], ...]  # per step, the top logprobs (and the chosen one)


def decode(engine: Any, prompt: str, modality: str, items: list) -> Decoded:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=GENERATE_TOKENS, logprobs=TOP_LOGPROBS)
    request = {"prompt": prompt, "multi_modal_data": oracle.as_mm_data(modality, items)}
    (result,) = engine.generate(request, params, use_tqdm=False)
    completion = result.outputs[0]
    steps = tuple({int(k): float(v.logprob) for k, v in (top or {}).items()}
                  for top in completion.logprobs or ())
    return Decoded(tuple(result.prompt_token_ids), tuple(completion.token_ids), steps)


def logprobs_difference(native: Decoded, backend: Decoded) -> tuple[str | None, dict]:
    """vLLM tests' `check_logprobs_close`: equal tokens, or at the first divergence each
    side's token is in the other's top logprobs; nothing after it is compared."""
    deltas: list[float] = []
    data: dict[str, Any] = {"native_tokens": list(native.tokens),
                            "backend_tokens": list(backend.tokens),
                            "prompt_ids_equal": native.prompt_ids == backend.prompt_ids}
    if len(native.tokens) != len(backend.tokens):
        data["max_logprob_diff"] = None
        return (f"native decoded {len(native.tokens)} tokens, backend {len(backend.tokens)}",
                data)
    difference = None
    for step, (a, b) in enumerate(zip(native.tokens, backend.tokens, strict=True)):
        mine, theirs = native.logprobs[step], backend.logprobs[step]
        if a == b:
            deltas.append(abs(mine[a] - theirs[b]))
            continue
        data["diverged_at"] = step
        if a not in theirs or b not in mine:
            difference = (f"step {step}: native token {a} ({mine.get(a, float('nan')):.4f}) "
                          f"vs backend token {b} ({theirs.get(b, float('nan')):.4f}); native "
                          f"top-{TOP_LOGPROBS} {sorted(mine)}, backend top-{TOP_LOGPROBS} "
                          f"{sorted(theirs)}")
        break
    data["max_logprob_diff"] = max(deltas) if deltas else None
    return difference, data


def engine_decode(recipe: Recipe, path: str, impl: str, device: str, dtype: str,
                  prompt: str, modality: str, items: list) -> Decoded:
    engine = llm(recipe, path, impl, device, dtype)
    ensure_distributed()  # a collected engine may have torn it down
    try:
        return decode(engine, prompt, modality, items)
    except Exception:
        # an in-process engine that failed mid-step is not trusted again
        model_key = cache_key("model", path, impl, device, dtype)
        if getattr(CACHE.entries.get(model_key), "engine", None) is engine:
            CACHE.drop(key=model_key)
        CACHE.drop(key=cache_key("llm", path, impl, device, dtype))
        raise


def check_generate(recipe: Recipe, path: str, *, device: str = "cpu", dtype: str = "float32",
                   subject_media: MediaHook | None = None) -> tuple[str | None, dict]:
    """Greedy decoding with logprobs on the recipe's two-item prompt, backend vs native; the
    backend failing (to load or to decode) is evidence, native failing ends the check."""
    require_native(recipe)
    modality, prompt, items = two_item_inputs(recipe, path)
    native = engine_decode(recipe, path, NATIVE, device, dtype, prompt, modality, items)
    subject_items = subject_media(list(items)) if subject_media else items
    try:
        backend = engine_decode(recipe, path, BACKEND, device, dtype, prompt, modality,
                                subject_items)
    except Exception as error:
        return f"backend: {error_text(error)}", {"native_tokens": list(native.tokens),
                                                 "backend": {"error": error_text(error)}}
    return logprobs_difference(native, backend)


MODEL_CHECK_FUNCTIONS: dict[str, Callable[..., tuple[str | None, dict]]] = {
    "encoder": check_encoder,
    "mrope": check_mrope,
    "generate": check_generate,
}
