#!/usr/bin/env python3
"""Confirms gemma3n's errors finding on transformers 5.24.0 with vLLM and transformers only:
a prompt with two audio placeholders and one audio item. Native vLLM's Gemma3n processor
raises; the Transformers backend places the item and leaves the other placeholder as text.

    .venv/bin/conformance exec --transformers 5.24.0 -- \
        .venv/bin/python reports/confirm/gemma3n_audio_placeholders.py GEMMA3N_CHECKPOINT_DIR
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import transformers  # noqa: E402
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

path = sys.argv[1]
processor = transformers.AutoProcessor.from_pretrained(path)
token = processor.audio_token
prompt = f"{token}\n{token}"  # the shrunk case: a newline between
audio = (np.random.default_rng(0).standard_normal(1600).astype(np.float32) * 0.1, 16000)
print("transformers", transformers.__version__, "prompt", repr(prompt), "1 audio item")
for impl in ("vllm", "transformers"):
    config = ModelConfig(model=path, model_impl=impl, max_model_len=4096,
                         limit_mm_per_prompt={"audio": 2, "image": 2})
    mm = MULTIMODAL_REGISTRY.create_processor(config)
    try:
        out = mm(prompt, mm.info.parse_mm_data({"audio": [audio]}))
        placed = {m: [(p.offset, p.length) for p in ps] for m, ps in out["mm_placeholders"].items()}
        print(impl, "accepted: placeholders", placed)
    except Exception as error:  # noqa: BLE001 - what each implementation does is the result
        print(impl, "raised", type(error).__name__, str(error)[:200])

# Output (the fixture built by fixtures/ on transformers 5.24.0, 2026-12-01):
OUTPUT = """
transformers 5.24.0 prompt '<audio_soft_token>\n<audio_soft_token>' 1 audio item
vllm raised RuntimeError Expected there to be 1 prompt placeholders corresponding to 1 audio
    items, but instead found 0 prompt placeholders! Make sure the implementation of
    `_apply_hf_processor_main` and `_get_mm_fields_confi
transformers accepted: placeholders {'audio': [(1, 28)]}
"""
# The same on transformers 5.25.0 (the fixture built for it, 2026-12-03): vllm raised the same
# RuntimeError; transformers accepted: placeholders {'audio': [(1, 28)]}
