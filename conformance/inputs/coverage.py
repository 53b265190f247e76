"""Which generative multimodal architectures a transformers release ships, and what vLLM does
with each: the candidates the harness should cover.

`probe()` runs inside one environment (one transformers, one vLLM): it reads transformers' auto
mappings (the image-text-to-text and multimodal-LM tasks, and the sequence-to-sequence ones of
model types with a multimodal processor: the generative multimodal classes) and
measures, on the real classes, what the backend requires of a model (vLLM's backend builds the
base model with `AutoModel.from_config`, runs it through transformers' attention interface, and
asks the processor for token counts); it reads vLLM's registry for what vLLM does with the
architecture. `python -m conformance.inputs.coverage` prints the probe as JSON (the `coverage`
command runs it once per transformers version, each in its overlay).
"""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import asdict, dataclass
from typing import Any

from conformance.core.vllms import current_label

# What vLLM's registry does with an architecture.
NATIVE = "native"  # a vLLM model of its own (the backend serves it only on request)
BACKEND_ONLY = "backend-only"  # the registry maps it to this backend's classes
FALLBACK = "fallback"  # unknown to the registry: vLLM tries this backend


@dataclass(frozen=True)
class Candidate:
    model_type: str
    architecture: str  # the generative class transformers maps the model type to
    base_class: str | None  # AutoModel's class for the model type (what the backend builds)
    processor: str | None  # AutoProcessor's class for the model type
    vllm: str  # NATIVE, BACKEND_ONLY or FALLBACK
    encoder_decoder: bool  # the config's default
    attention_interface: bool | None  # the base class's `_supports_attention_backend`
    token_counts: bool | None  # the processor defines `_get_num_multimodal_tokens`
    moe: bool  # the text config has experts


# These are signals, not verdicts: the backend serves SmolVLM, whose processor has no
# `_get_num_multimodal_tokens` on 5.17.0 (the Offsets path counts from the replacement
# offsets), and Qwen2-Audio, whose base class reports no attention backend. Why a candidate
# cannot be served comes from building it and loading it through the backend.


def _class(module: str, name: str | None) -> Any:
    if not name:
        return None
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None  # a class a release names but cannot import here (optional dependency)


def _names(mapping: dict[str, Any], model_type: str) -> list[str]:
    value = mapping.get(model_type)
    if value is None:
        return []
    return [value] if isinstance(value, str) else [v for v in value if v]


def _counts_tokens(processor_cls: Any) -> bool | None:
    if processor_cls is None:
        return None
    from transformers import ProcessorMixin

    own = getattr(processor_cls, "_get_num_multimodal_tokens", None)
    # a default on the base class (where a release has one) counts nothing
    return own is not None and own is not getattr(ProcessorMixin, "_get_num_multimodal_tokens",
                                                  None)


def _has_experts(config: Any) -> bool:
    text = getattr(config, "text_config", None) or config
    return any((getattr(text, name, 0) or 0) > 1 for name in (
        "num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"))


def probe() -> dict[str, Any]:
    """The candidates of the transformers and vLLM this process imports."""
    import transformers
    from transformers.models.auto import configuration_auto, modeling_auto, processing_auto

    try:
        from vllm.model_executor.models import registry as vllm_registry
    except ImportError:
        vllm_registry = None
    tasks = (modeling_auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
             modeling_auto.MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES)
    found: dict[str, str] = {}
    for mapping in tasks:
        for model_type in mapping:
            names = _names(mapping, model_type)
            if names and model_type not in found:
                found[model_type] = names[0]
    # audio-text LMs (Audio Flamingo 3, ...) are listed only among the sequence-to-sequence
    # tasks, beside text-only encoder-decoders: those with a multimodal processor
    for mapping in (modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
                    modeling_auto.MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES):
        for model_type in mapping:
            names = _names(mapping, model_type)
            if (names and model_type not in found
                    and model_type in processing_auto.PROCESSOR_MAPPING_NAMES):
                found[model_type] = names[0]
    candidates = []
    for model_type, architecture in sorted(found.items()):
        base_name = (_names(modeling_auto.MODEL_MAPPING_NAMES, model_type) or [None])[0]
        processor_name = (_names(processing_auto.PROCESSOR_MAPPING_NAMES, model_type) or [None])[0]
        base = _class("transformers", base_name)
        config_name = configuration_auto.CONFIG_MAPPING_NAMES.get(model_type)
        config_cls = _class("transformers", config_name)
        try:
            config = config_cls() if config_cls is not None else None
        except Exception:  # noqa: BLE001 - a config that needs arguments: defaults unknown
            config = None
        candidates.append(Candidate(
            model_type=model_type,
            architecture=architecture,
            base_class=base_name,
            processor=processor_name,
            vllm=_vllm_route(vllm_registry, architecture),
            encoder_decoder=bool(getattr(config, "is_encoder_decoder", False)),
            attention_interface=(None if base is None
                                 else bool(getattr(base, "_supports_attention_backend", False))),
            token_counts=_counts_tokens(_class("transformers", processor_name)),
            moe=config is not None and _has_experts(config),
        ))
    return {"transformers": transformers.__version__,
            "vllm": _vllm_version(),
            "candidates": [asdict(c) for c in candidates]}


def _vllm_route(registry: Any, architecture: str) -> str:
    if registry is None:
        return FALLBACK
    if architecture in getattr(registry, "_TRANSFORMERS_SUPPORTED_MODELS", {}):
        return BACKEND_ONLY
    if architecture in getattr(registry, "_MULTIMODAL_MODELS", {}):
        return NATIVE
    return FALLBACK


def _vllm_version() -> str:
    return current_label()


if __name__ == "__main__":
    json.dump(probe(), sys.stdout, indent=1)
    sys.stdout.write("\n")
