#!/usr/bin/env python3
"""Why vLLM's Transformers backend cannot serve VibeVoice (text-to-speech), with vLLM and
transformers only.

    .venv/bin/python reports/confirm/vibevoice_unservable.py CHECKPOINT_DIR

CHECKPOINT_DIR: a VibeVoiceForConditionalGeneration checkpoint as transformers saves it (the
tiny one fixtures/recipes/vibevoice.py builds: vibevoice/VibeVoice-1.5B-hf's layout, tiny
widths). vLLM has no native model: it falls back to the backend. Three readings:
1. what transformers' AutoModel maps the config to (the class the backend builds as its model);
2. the encoder budget vLLM sizes before an engine starts (`get_mm_max_toks_per_item`);
3. the backend's class built on the CPU as a worker builds it, then given the checkpoint's
   weights (`load_weights`): what it loads, or what it raises.
"""

import glob
import os
import sys
import tempfile

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import torch  # noqa: E402
import transformers  # noqa: E402
import vllm  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from vllm.config import (  # noqa: E402
    DeviceConfig,
    LoadConfig,
    ModelConfig,
    VllmConfig,
    set_current_vllm_config,
)
from vllm.distributed import parallel_state  # noqa: E402
from vllm.model_executor.model_loader.utils import get_model_architecture  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402
from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item  # noqa: E402


def main(path: str) -> None:
    print("vLLM", vllm.__version__, "transformers", transformers.__version__)
    config = transformers.AutoConfig.from_pretrained(path)
    mapped = transformers.models.auto.modeling_auto.MODEL_MAPPING_NAMES[config.model_type]
    print(f"1. AutoModel maps {config.model_type!r} to {mapped}")

    model_config = ModelConfig(model=path, model_impl="transformers", max_model_len=512,
                               limit_mm_per_prompt={"audio": 1}, enforce_eager=True)
    try:
        budget = get_mm_max_toks_per_item(MULTIMODAL_REGISTRY.create_processor(model_config),
                                          {"audio": 1}, cache=None)
        print("2. the backend's audio budget:", dict(budget))
    except Exception as error:  # noqa: BLE001 - the error is the reading
        print(f"2. the backend's audio budget raised {type(error).__name__}: {error}")

    model_class, _ = get_model_architecture(model_config)
    vllm_config = VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"),
                             load_config=LoadConfig())
    with set_current_vllm_config(vllm_config):
        if not parallel_state.model_parallel_is_initialized():
            store = f"file://{tempfile.mkdtemp(prefix='vibevoice-dist-')}/store"
            parallel_state.init_distributed_environment(1, 0, store, 0, "gloo")
            parallel_state.initialize_model_parallel(1, 1)
        model = model_class(vllm_config=vllm_config, prefix="")
        names = [n for n, _ in model.named_parameters()]
        print(f"3. {model_class.__name__} built; e.g. its parameter "
              f"{next(n for n in names if 'audio_tower' in n)!r}")
        weights = {}
        for file in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
            weights.update(load_file(file))
        print(f"   the checkpoint's key {next(k for k in weights if 'audio_tower' in k)!r}")
        try:
            with torch.no_grad():
                loaded = model.load_weights(iter(weights.items()))
            print(f"   load_weights loaded {len(loaded)} of {len(weights)} tensors")
        except Exception as error:  # noqa: BLE001 - the error is the reading
            print(f"   load_weights raised {type(error).__name__}: {str(error)[:160]}")


if __name__ == "__main__":
    main(sys.argv[1])
