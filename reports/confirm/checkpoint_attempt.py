#!/usr/bin/env python3
"""Can vLLM's Transformers backend build a model type's model from its hub checkpoint's config?
(vLLM and transformers only)

    python checkpoint_attempt.py MODEL_TYPE [MODEL_TYPE...]

reports/confirm/coverage_attempt.py's attempt (its helpers imported from it), with the config
of the checkpoint each model type's transformers sources name (`CHECKPOINTS`: the checkpoint of
the config class's `auto_docstring`, and the fields its config.json sets where transformers'
defaults leave them unset or differ from it, each from transformers' own sources: the config
class's docstring and its __post_init__, the modeling code; none compared with the hub files,
which are out of reach here) in place of transformers' bare defaults. For each model type:
1. `config`: vLLM's `ModelConfig(model=FOLDER, model_impl="transformers")` (the processor as
   the classes' defaults make it, a word-level tokenizer), which resolves the architecture to
   one of the backend's classes;
2. `build`: that class built as an engine's worker builds it (one process, tensor parallel 1),
   its parameters on the meta device (the checkpoint's full size, no memory for it).
The control: transformers' own generative class built from the same config on the meta device
(`hf_builds`). Prints one JSON line per model type.
"""

import inspect
import json
import os
import re
import sys
import tempfile
import traceback

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

# the generic attempt's pieces this attempt shares as they are (its script beside this one)
from coverage_attempt import (  # noqa: E402
    NAMED,
    SPECIAL,
    architecture,
    control,
    distributed,
    hf_control,
    message,
    unmasked,
    where,
)

# model type -> (the checkpoint its config class's docstring names, the fields its config.json
# sets where transformers' defaults differ; a nested dict updates that sub-config's defaults)
CHECKPOINTS: dict[str, tuple[str, dict]] = {
    # QSA indexer fields: transformers' defaults leave them None, with which the default
    # "indexed_attention" layers do not build; values chosen (the docstring: one key head; the
    # config's validation: the index head holds the attention's rotary dims, 256), not the hub's
    "qwen4_exp": ("Qwen/Qwen4-Exp", {"text_config": {
        "indexer_n_heads": 16, "indexer_kv_heads": 1, "indexer_head_dim": 256,
        "indexer_budget": 2048, "indexer_compress_ratio": 4}}),
    # rope per layer type, as Cohere2's checkpoints (the config's convert_rope_params_to_dict
    # reads per-layer-type entries; its comment cites the hub config's): sliding layers RoPE,
    # full layers NoPE (None); 3 sliding then 1 full, over the default's 40 layers
    "cohere_compass": ("CohereLabs/North-Micro-Vision-Instruct", {"text_config": {
        "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 10,
        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 50000.0},
                            "full_attention": None}}}),
    # the 26B-A4B's experts (Gemma 4 26B-A4B's: 128 experts, 8 per token, width 704; from
    # memory, unchecked against the hub)
    "diffusion_gemma": ("google/diffusiongemma-26B-A4B-it", {"text_config": {
        "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704}}),
    # the talker's shared expert: modeling_qwen3_omni_moe reads the talker text config's
    # shared_expert_intermediate_size, which the config class leaves to config.json (768: the
    # thinker's expert width, unchecked against the hub), and the talker config's
    # spatial_merge_size (its vision's, 2), which the talker's rope index reads
    "qwen3_omni_moe": ("Qwen/Qwen3-Omni-30B-A3B-Instruct", {"talker_config": {
        "spatial_merge_size": 2, "text_config": {"shared_expert_intermediate_size": 768}}}),
}
# model types whose published config.json holds the text model's fields at its top level (their
# config class says so), not under text_config
FLAT = {"dots3_note"}
# processor parts the auto mappings do not name for a model type, by the class its processor
# takes (its processing module's own import); "processor": the processor class itself
PARTS: dict[str, dict[str, str]] = {
    "nemotron_h_omni": {"feature_extractor": "ParakeetFeatureExtractor"},
    # no processor of its own (processing_auto names none): its modeling docstring processes
    # with Qwen3-VL's AutoProcessor, and its image and video processors are Qwen3-VL's
    "cosmos3_omni": {"processor": "Qwen3VLProcessor"},
    # DiffusionGemma's processor is Gemma 4's (processing_auto), and so are its parts
    "diffusion_gemma": {"image_processor": "Gemma4ImageProcessor",
                        "feature_extractor": "Gemma4AudioFeatureExtractor",
                        "video_processor": "Gemma4VideoProcessor"},
}


def merged(default: dict, fields: dict) -> dict:
    """`default` (a config's to_dict()) with `fields` set, nested dicts updated key by key."""
    out = dict(default)
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            value = merged(out[key], value)
        out[key] = value
    return out


def checkpoint_kwargs(model_type: str) -> dict:
    from transformers import AutoConfig

    _, fields = CHECKPOINTS.get(model_type, ("", {}))
    default = AutoConfig.for_model(model_type).to_dict()
    return {key: merged(default[key], value) if isinstance(value, dict)
            and isinstance(default.get(key), dict) else value for key, value in fields.items()}


def vllm_frame(error: BaseException) -> str:
    """The innermost frame of vLLM's own code the error came through (what read the field)."""
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if "/vllm/" in frame.filename and "/pydantic" not in frame.filename:
            return f"vllm/{frame.filename.rsplit('/vllm/', 1)[1]}:{frame.lineno} ({frame.name})"
    return ""


def processor_files(model_type: str, folder: str) -> list[str]:
    """The model type's processor as its classes' defaults make it, beside the config: its
    image processor, feature extractor and video processor (each default-constructed), and a
    word-level tokenizer holding the placeholder tokens processors use, the named ones as its
    named special tokens (every other word unknown). What could not be made is left out: vLLM
    then reports what it lacks."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.models.auto import (
        feature_extraction_auto,
        image_processing_auto,
        processing_auto,
        video_processing_auto,
    )

    made, parts = [], {}
    # a thinker (the text half of an omni model) takes its parent model type's processor
    owner = model_type if model_type in processing_auto.PROCESSOR_MAPPING_NAMES else \
        model_type.removesuffix("_thinker")
    for part, mapping in (("image_processor", image_processing_auto.IMAGE_PROCESSOR_MAPPING_NAMES),
                          ("feature_extractor",
                           feature_extraction_auto.FEATURE_EXTRACTOR_MAPPING_NAMES),
                          ("video_processor", video_processing_auto.VIDEO_PROCESSOR_MAPPING_NAMES)):
        names = PARTS.get(model_type, {}).get(part) or mapping.get(model_type) or \
            mapping.get(owner)
        if isinstance(names, dict):  # {"torchvision": ..., "pil": ...} (5.x image processors)
            names = list(names.values())
        names = [names] if isinstance(names, str) else [n for n in (names or ()) if n]
        for name in names:
            try:
                parts[part] = getattr(transformers, name)()
                made.append(name)
                break
            except Exception:  # noqa: BLE001 - a class that needs arguments or a backend
                continue
    # each alone as well (a checkpoint's flat preprocessor_config.json), then the processor
    # from its parts below (its nested processor_config.json: an image processor and a feature
    # extractor both write preprocessor_config.json, so alone the last one would win)
    for key, part in list(parts.items()):
        try:
            part.save_pretrained(folder)
        except Exception as error:  # noqa: BLE001 - a default that cannot be saved (a font)
            del parts[key]
            made.append(f"{type(part).__name__} not saved: {message(error)[:120]}")
    named = dict(NAMED)
    name = PARTS.get(model_type, {}).get("processor") or \
        processing_auto.PROCESSOR_MAPPING_NAMES.get(owner)
    for _ in range(8):  # a processor asking its tokenizer for a named token it lacks gets it
        tokens = SPECIAL + [t for t in named.values() if t not in SPECIAL]
        vocab = {token: i for i, token in enumerate(tokens + [f"w{i}" for i in range(200)])}
        core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
        core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>",
                                            bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                            extra_special_tokens=named)
        tokenizer.save_pretrained(folder)
        if not name:
            break
        try:
            from transformers import AutoProcessor

            try:
                processor = AutoProcessor.from_pretrained(folder)
            except (OSError, ValueError):  # the parts were not found by their files alone
                cls = getattr(transformers, name)
                given = inspect.signature(cls.__init__).parameters
                processor = cls(tokenizer=tokenizer,
                                **{k: v for k, v in parts.items() if k in given})
            processor.save_pretrained(folder)
            made += ["tokenizer", name]
            return made
        except AttributeError as error:
            lacking = re.search(r"has no attribute (\w+_token)$", str(error))
            if lacking is None:
                made += ["tokenizer", f"{name}: {message(error)[:200]}"]
                return made
            named[lacking.group(1)] = f"<{lacking.group(1)}>"
        except Exception as error:  # noqa: BLE001 - vLLM reports what it then lacks
            made += ["tokenizer", f"{name}: {message(error)[:200]}"]
            return made
    made.append("tokenizer")
    return made


def attempt(model_type: str) -> dict:
    import torch
    import transformers
    import vllm
    from transformers import AutoConfig

    out = {"model_type": model_type, "transformers": transformers.__version__,
           "vllm": vllm.__version__, "checkpoint": CHECKPOINTS.get(model_type, ("",))[0],
           "stage": "config", "architecture": architecture(model_type)}
    try:
        config = AutoConfig.for_model(model_type, **checkpoint_kwargs(model_type))
    except Exception as error:  # noqa: BLE001 - the reading is the result
        out.update(stage="transformers-config", error=message(error), raised_in=where(error))
        return out
    config.architectures = [out["architecture"]]
    folder = tempfile.mkdtemp(prefix=f"checkpoint-{model_type}-")
    config.save_pretrained(folder)
    if model_type in FLAT:
        path = os.path.join(folder, "config.json")
        with open(path) as file:
            saved = json.load(file)
        text = saved.pop("text_config")
        text.pop("model_type", None)
        with open(path, "w") as file:
            json.dump({**text, **saved}, file, indent=2)
    out["processor_files"] = processor_files(model_type, folder)
    out["hf_builds"] = hf_control(folder)
    try:
        from vllm.config import (
            DeviceConfig,
            LoadConfig,
            ModelConfig,
            VllmConfig,
            set_current_vllm_config,
        )
        from vllm.model_executor.model_loader.utils import get_model_architecture

        model_config = ModelConfig(model=folder, model_impl="transformers",
                                   dtype="bfloat16", enforce_eager=True)
        model_class, arch = get_model_architecture(model_config)
        out["vllm_class"] = model_class.__name__
        out["stage"] = "build"
        vllm_config = VllmConfig(model_config=model_config,
                                 device_config=DeviceConfig(device="cpu"),
                                 load_config=LoadConfig(load_format="dummy"))
        distributed()
        with set_current_vllm_config(vllm_config), torch.device("meta"):
            try:
                model_class(vllm_config=vllm_config, prefix="")
            except AttributeError as masked:
                if "_pre_trained_model_classes" not in str(masked):
                    raise
                out["masked"] = message(masked)
                # torch's Module.__getattr__ answers an AttributeError raised inside the
                # backend's cached property with its own message: built again with the
                # property's own error unmasked
                unmasked(model_class)(vllm_config=vllm_config, prefix="")
        out["stage"] = "built"
    except Exception as error:  # noqa: BLE001
        origin = error.__cause__ if str(error).startswith("(unmasked)") else error
        out.update(error=message(origin if origin is not error else error),
                   raised_in=where(origin or error), vllm_frame=vllm_frame(origin or error))
    return out


if __name__ == "__main__":
    import faulthandler

    if sys.argv[1] == "--control":
        print(control(sys.argv[2]))
        sys.exit(0)
    for name in sys.argv[1:]:
        # a hang is reported (its stack, on stderr), not waited on; the next ones are lost
        faulthandler.dump_traceback_later(180, exit=True)
        print(json.dumps(attempt(name)), flush=True)
