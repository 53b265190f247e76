#!/usr/bin/env python3
"""Confirms legacy-surplus-placeholder-unexplained with vLLM and transformers only: on the
Legacy path (transformers < 5.15) a prompt with one image placeholder more than images makes
the HF processor's get_text_with_replacements raise a bare StopIteration, and the backend
passes it on inside vLLM's "Failed to apply ..." wrapper with nothing after the colon: the
error names neither the modality nor the counts. Native vLLM's processor is run beside it.

    .venv/bin/conformance exec --transformers 5.12.1 -- \
        .venv/bin/python reports/confirm/legacy_surplus_placeholder_error.py LLAVA_CHECKPOINT_DIR
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
prompt = processor.image_token * 2
image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8))
print("transformers", transformers.__version__, "prompt", repr(prompt), "1 image")
try:
    processor(text=prompt, images=[image], return_tensors="pt")
    print("hf processor accepted")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print("hf processor raised", repr(error))
for impl in ("vllm", "transformers"):
    config = ModelConfig(model=path, model_impl=impl, max_model_len=4096,
                         limit_mm_per_prompt={"image": 2})
    mm = MULTIMODAL_REGISTRY.create_processor(config)
    try:
        mm(prompt, mm.info.parse_mm_data({"image": [image]}))
        print(impl, "accepted")
    except Exception as error:  # noqa: BLE001 - what each implementation does is the result
        message = str(error)
        print(impl, "raised", type(error).__name__, "| ends with:", repr(message[-60:]))
