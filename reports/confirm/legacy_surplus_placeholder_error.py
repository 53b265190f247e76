#!/usr/bin/env python3
"""Confirms legacy-surplus-placeholder-unexplained with vLLM and transformers only: on the
Legacy path (transformers < 5.15) a prompt with one image placeholder more than images makes
the HF processor's get_text_with_replacements raise a bare StopIteration (an audio model's
checkpoint: one audio placeholder more than audios), and the backend
passes it on inside vLLM's "Failed to apply ..." wrapper with nothing after the colon: the
error names neither the modality nor the counts. Native vLLM's processor is run beside it.

    .venv/bin/conformance exec --transformers 5.12.1 -- \
        .venv/bin/python reports/confirm/legacy_surplus_placeholder_error.py LLAVA_CHECKPOINT_DIR
    (or AUDIOFLAMINGO3_CHECKPOINT_DIR)
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import transformers  # noqa: E402
from PIL import Image  # noqa: E402
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

path = sys.argv[1]
processor = transformers.AutoProcessor.from_pretrained(path)
modality = "image" if hasattr(processor, "image_processor") else "audio"
prompt = getattr(processor, f"{modality}_token") * 2
if modality == "image":
    item = Image.fromarray(np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8))
else:  # 1 s of noise
    item = np.random.default_rng(0).uniform(-1, 1, 16000).astype(np.float32)
print("transformers", transformers.__version__, "prompt", repr(prompt), "1", modality)
try:
    processor(text=prompt, **{"images" if modality == "image" else "audio": [item]},
              return_tensors="pt")
    print("hf processor accepted")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print("hf processor raised", repr(error))
for impl in ("vllm", "transformers"):
    try:  # an architecture without a native model (VipLlava) fails here for "vllm"
        config = ModelConfig(model=path, model_impl=impl, max_model_len=4096,
                             limit_mm_per_prompt={modality: 2})
        mm = MULTIMODAL_REGISTRY.create_processor(config)
        mm(prompt, mm.info.parse_mm_data({modality: [item]}))
        print(impl, "accepted")
    except Exception as error:  # noqa: BLE001 - what each implementation does is the result
        message = str(error)
        print(impl, "raised", type(error).__name__, "| starts with:", repr(message[:100]),
              "| ends with:", repr(message[-60:]))
