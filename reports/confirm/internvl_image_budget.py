"""InternVL on vLLM 0.32.0: the backend's image budget per item vs native vLLM's (vLLM and
transformers only).

    python internvl_image_budget.py CHECKPOINT   # an InternVL-hf checkpoint folder

vLLM sizes its encoder cache from the most embeddings one image can have
(vllm.multimodal.encoder_budget.get_mm_max_toks_per_item). Prints both implementations' budget
and the range and embeddings each gives the largest images the harness draws. Exit 1 when
the budgets differ.
"""

import sys

import numpy as np
import vllm
from PIL import Image
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY
from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item

path = sys.argv[1]
print("vLLM", vllm.__version__)
budgets = {}
for impl in ("vllm", "transformers"):
    config = ModelConfig(model=path, model_impl=impl, max_model_len=None,
                         limit_mm_per_prompt={"image": 1})
    processor = MULTIMODAL_REGISTRY.create_processor(config)
    info = processor.info
    # what vLLM's encoder budget reads: the processor's max tokens per item, or, where it
    # reports none (native InternVL), the embeddings of its dummy inputs
    budgets[impl] = get_mm_max_toks_per_item(processor, {"image": 1}, cache=None)["image"]
    line = f"{impl}: budget per image {budgets[impl]}"
    if impl == "transformers":
        line += f", probe size {info.get_image_size_with_most_features()}"
    for h, w in ((400, 400), (400, 51), (51, 400)):
        image = Image.fromarray(np.zeros((h, w, 3), dtype=np.uint8))
        out = processor("<IMG_CONTEXT>", info.parse_mm_data({"image": [image]}))
        (r,) = out["mm_placeholders"]["image"]
        embeds = r.length if r.is_embed is None else int(r.is_embed.sum())
        line += f"; {h}x{w}: range length {r.length}, embeddings {embeds}"
    print(line)
print("budgets equal:", budgets["vllm"] == budgets["transformers"])
sys.exit(0 if budgets["vllm"] == budgets["transformers"] else 1)

# Measured 2026-12-01 with .venv-vllm-0.32.0/bin/python on the tiny internvl fixture
# (transformers 5.17.0; on vLLM 0.31.0 the backend cannot build its processor at all:
# internvl-processor-shadowed):
#   vLLM 0.32.0
#   vllm: budget per image 4; 400x400: range length 22, embeddings 20; 400x51: range length 22,
#     embeddings 20; 51x400: range length 22, embeddings 20
#   transformers: budget per image 22, probe size ImageSize(width=312, height=312); 400x400:
#     range length 22, embeddings 20; 400x51: range length 22, embeddings 20; 51x400: range
#     length 22, embeddings 20
#   budgets equal: False
#   exit 1
