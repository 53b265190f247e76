"""Does vLLM's Transformers backend take as many items per prompt as native vLLM? (vLLM and
transformers only.)

    python item_limits.py CHECKPOINT MODALITY

vLLM reads a model's items per prompt from its processing info's `get_supported_mm_limits`
(None: no limit) and refuses a request, or a `limit_mm_per_prompt`, above it. Native vLLM's
PaliGemma and AudioFlamingo3 take one image / one audio per prompt; the Transformers backend's
info returns `dict.fromkeys(modalities)` (no limit) for every model. Each implementation's
limit, then two items of MODALITY through each one's processor with `limit_mm_per_prompt` 2.
Exit 1: the limits differ (reproduces).
"""

import sys

import numpy as np
import transformers
import vllm
from PIL import Image
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY

path, modality = sys.argv[1], sys.argv[2]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
rng = np.random.RandomState(0)
items = ([Image.fromarray(rng.randint(0, 256, (32, 32, 3), dtype=np.uint8)) for _ in range(2)]
         if modality == "image" else [(rng.uniform(-.5, .5, 16000).astype(np.float32), 16000)
                                      for _ in range(2)])
limits = {}
for impl in ("vllm", "transformers"):
    config = ModelConfig(model=path, model_impl=impl, limit_mm_per_prompt={modality: 1})
    info = MULTIMODAL_REGISTRY.create_processor(config).info
    limits[impl] = info.get_supported_mm_limits().get(modality)
    try:
        two = ModelConfig(model=path, model_impl=impl, limit_mm_per_prompt={modality: 2})
        processor = MULTIMODAL_REGISTRY.create_processor(two)
        allowed = processor.info.allowed_mm_limits.get(modality)
        print(f"model_impl={impl!r}: get_supported_mm_limits()[{modality!r}] = {limits[impl]}; "
              f"with limit_mm_per_prompt 2 it allows {allowed}")
    except Exception as error:  # what vLLM says is the evidence
        said = " ".join(str(error).split())[:200]
        print(f"model_impl={impl!r}: get_supported_mm_limits()[{modality!r}] = {limits[impl]}; "
              f"limit_mm_per_prompt 2: {type(error).__name__}: {said}")
sys.exit(1 if limits["vllm"] != limits["transformers"] else 0)

# Measured 2026-12-03, vLLM 0.31.0 (.venv), transformers 5.17.0, this project's tiny fixtures:
#   paligemma image:
#   model_impl='vllm': get_supported_mm_limits()['image'] = 1; with limit_mm_per_prompt 2 it
#     allows 1
#   model_impl='transformers': get_supported_mm_limits()['image'] = None; with
#     limit_mm_per_prompt 2 it allows 2                                        (exit 1)
#   audioflamingo3 audio: native 1 (allows 1), backend None (allows 2)         (exit 1)
#   llava image (a control): None and None, both allow 2                       (exit 0)
