"""Native vLLM vs vLLM's Transformers backend on one checkpoint: processing and one greedy step.

Both processors are created through vLLM's multimodal registry from a `ModelConfig` that differs
only in `model_impl` ("vllm": the native model, the oracle; "transformers": the backend).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from impl.types import Placeholder, ProcessedPrompt, placeholder_from_mask

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

IMPLS = ("vllm", "transformers")


def placeholder_from_range(offset: int, length: int, is_embed) -> Placeholder:
    """A vLLM PlaceholderRange; its `is_embed=None` means every position carries an embedding."""
    return placeholder_from_mask(offset, None if is_embed is None else is_embed.tolist(), length)


def describe(p: Placeholder) -> str:
    embeds = "all" if len(p.embed_positions) == p.length else (
        f"{len(p.embed_positions)} of {p.length}")
    return f"offset={p.offset} length={p.length} embeds={embeds}"


def from_vllm_output(out: Any) -> ProcessedPrompt:
    """A vLLM processor's output as impl's dataclass: ids, placeholders, per-item fields and
    hashes."""
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
    if impl == "vllm":
        return {"tokenizer_mode": "mistral", "config_format": "mistral", "load_format": "mistral"}
    return {"config_format": "hf", "load_format": "safetensors"}


def model_options(path: str, impl: str) -> dict[str, str]:
    """The `checkpoint_format` options a `ModelConfig` takes."""
    return {k: v for k, v in checkpoint_format(path, impl).items() if k != "load_format"}


def load_options(path: str, impl: str) -> dict[str, str]:
    """The `checkpoint_format` options a `LoadConfig` takes."""
    return {k: v for k, v in checkpoint_format(path, impl).items() if k == "load_format"}


def model_config(path: str, impl: str, limits: dict[str, int], **overrides):
    from vllm.config import ModelConfig

    return ModelConfig(
        **model_options(path, impl),
        model=path,
        model_impl=impl,
        max_model_len=overrides.pop("max_model_len", 4096),
        limit_mm_per_prompt=limits,
        mm_processor_cache_gb=overrides.pop("mm_processor_cache_gb", 0),
        **overrides,
    )


def create_processor(path: str, impl: str, limits: dict[str, int]):
    from vllm.multimodal import MULTIMODAL_REGISTRY

    return MULTIMODAL_REGISTRY.create_processor(model_config(path, impl, limits))


def as_mm_data(modality: str, items: Sequence) -> dict:
    if modality == "audio":
        from conformance.media import SAMPLING_RATE

        return {"audio": [(item, SAMPLING_RATE) for item in items]}
    return {modality: list(items)}


def process(processor, prompt: str | list[int], mm_data: dict) -> ProcessedPrompt:
    return from_vllm_output(processor(prompt, processor.info.parse_mm_data(mm_data)))


def first_difference(expected: ProcessedPrompt, actual: ProcessedPrompt) -> str | None:
    """None when equal; else the first differing token or placeholder, stated precisely."""
    a, b = expected.prompt_ids, actual.prompt_ids
    if a != b:
        pairs = enumerate(zip(a, b, strict=False))
        index = next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
        return (
            f"prompt ids differ at position {index}: native {a[index:index + 6]} vs backend "
            f"{b[index:index + 6]} (lengths {len(a)} vs {len(b)})"
        )
    for modality in sorted(set(expected.placeholders) | set(actual.placeholders)):
        mine = expected.placeholders.get(modality, ())
        theirs = actual.placeholders.get(modality, ())
        if len(mine) != len(theirs):
            return f"{modality}: native has {len(mine)} placeholders, backend {len(theirs)}"
        for index, (x, y) in enumerate(zip(mine, theirs, strict=True)):
            if (x.offset, x.length) != (y.offset, y.length):
                return f"{modality} item {index}: native {describe(x)} vs backend {describe(y)}"
            if x.embed_positions != y.embed_positions:
                only_native = sorted(set(x.embed_positions) - set(y.embed_positions))[:5]
                only_backend = sorted(set(y.embed_positions) - set(x.embed_positions))[:5]
                return (
                    f"{modality} item {index}: embedding positions differ: native "
                    f"{describe(x)}, backend {describe(y)}; only native {only_native}, "
                    f"only backend {only_backend}"
                )
    return None


def greedy_step(path: str, impl: str, prompt: str, mm_data: dict, limits: dict[str, int]):
    """Load the checkpoint as a vLLM model with `impl` and decode one token greedily."""
    from vllm import LLM, SamplingParams

    llm = LLM(
        **checkpoint_format(path, impl),
        model=path,
        model_impl=impl,
        max_model_len=1024,
        max_num_seqs=1,
        max_num_batched_tokens=1024,
        enforce_eager=True,
        limit_mm_per_prompt=limits,
        kv_cache_memory_bytes=32 * 1024 * 1024,
        mm_processor_cache_gb=0,
        seed=0,
    )
    try:
        params = SamplingParams(temperature=0.0, max_tokens=1, logprobs=5)
        (result,) = llm.generate({"prompt": prompt, "multi_modal_data": mm_data}, params)
        completion = result.outputs[0]
        top = completion.logprobs[0] if completion.logprobs else {}
        return completion.token_ids[0], {int(k): float(v.logprob) for k, v in top.items()}
    finally:
        del llm
