"""internvl-processor-shadowed, re-measured per vLLM release (vLLM and transformers only).

    python internvl_processor_shadowed.py CHECKPOINT   # an InternVL-hf checkpoint folder

Builds vLLM's multimodal processor for the checkpoint twice, as the engine does: native
(model_impl="vllm") and the Transformers backend (model_impl="transformers"), and processes one
prompt with one image through both. Exit 0: the backend processes it and its placeholders equal
native vLLM's; exit 1: it does not (the finding shows).
"""

import sys

import numpy as np
import vllm
import vllm.transformers_utils.processors as vllm_processors
from PIL import Image
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY

path = sys.argv[1]
print("vLLM", vllm.__version__, "| vllm.transformers_utils.processors lists InternVLProcessor:",
      "InternVLProcessor" in getattr(vllm_processors, "__all__", ()))
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 60, 3), dtype=np.uint8))
prompt = "Describe <IMG_CONTEXT> please"
ranges = {}
for impl in ("vllm", "transformers"):
    try:
        config = ModelConfig(model=path, model_impl=impl, limit_mm_per_prompt={"image": 1},
                             max_model_len=None)
        processor = MULTIMODAL_REGISTRY.create_processor(config)
        out = processor(prompt, processor.info.parse_mm_data({"image": [image]}))
    except Exception as error:  # noqa: BLE001 - the finding is the error
        print(f"{impl}: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
        continue
    ranges[impl] = [(r.offset, r.length) for r in out["mm_placeholders"]["image"]]
    print(f"{impl}: {len(out['prompt_token_ids'])} ids, image ranges {ranges[impl]}")
same = "transformers" in ranges and ranges.get("transformers") == ranges.get("vllm")
print("backend agrees with native vLLM:", same)
sys.exit(0 if same else 1)

# Measured 2026-12-01 on the tiny internvl fixture (transformers 5.17.0), each release's env:
#   .venv/bin/python (vLLM 0.31.0):
#     vLLM 0.31.0 | vllm.transformers_utils.processors lists InternVLProcessor: True
#     vllm: 16 ids, image ranges [(3, 6)]
#     transformers: TypeError: InternVLProcessor.__init__() missing 1 required keyword-only
#       argument: 'image_seq_length'
#     backend agrees with native vLLM: False          (exit 1: the finding shows)
#   .venv-vllm-0.32.0/bin/python (vLLM 0.32.0):
#     vLLM 0.32.0 | vllm.transformers_utils.processors lists InternVLProcessor: False
#     vllm: 16 ids, image ranges [(3, 6)]
#     transformers: 16 ids, image ranges [(3, 6)]
#     backend agrees with native vLLM: True           (exit 0: fixed in 0.32.0)
