"""How vLLM's Transformers backend serves HunYuanVL (vLLM and transformers only).

    python hunyuan_vl_backend.py CHECKPOINT

HunYuanVL is in vLLM 0.31.0's `_TRANSFORMERS_SUPPORTED_MODELS`: only the backend serves it.
One 40x56 image (float32, CPU), three readings:
1. the HF processor's counts for it (`_get_num_multimodal_tokens`: num_image_tokens and the
   num_image_patches the backend splits the encoder's output by) and the HF model's
   get_image_features output; then the backend's own `_split_embeddings` applied to that
   output with those split sizes: the rows it would hand the image's placeholders;
2. the encoder budget per item vLLM's scheduler reads for the backend, and the HF processor's
   token count for the images the suites serve (400x400, 400x51, 51x400);
3. one greedy step through the backend, and whether the input of the vision merger's `mlp`
   (a Linear the backend swaps for a vLLM linear layer) is contiguous in the HF model.
Exit 1 when any reading differs from the HF model (reproduces).
"""

import os
import sys

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor, HunYuanVLForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
processor = AutoProcessor.from_pretrained(path)
tok = processor.tokenizer
image_text = tok.image_start_token + tok.image_token + tok.image_end_token
PROMPT = f"{tok.bos_token}<｜hy_User｜>{image_text}What is in this image?<｜hy_Assistant｜>"
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
reproduced = False

# 1. what the backend splits by, and what the HF encoder returns
counts = processor._get_num_multimodal_tokens(image_sizes=[[40, 56]])
model = HunYuanVLForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
inputs = processor(text=PROMPT, images=[image], return_tensors="pt")
placeholders = int((inputs["input_ids"][0] == tok.image_token_id).sum())
seen = {}


def record(module, args):
    seen["contiguous"] = args[0].is_contiguous()


model.model.vision_tower.patch_merger.mlp.register_forward_pre_hook(record)
with torch.inference_mode():
    features = model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"])
pooled = features.pooler_output
print(f"1. HF processor: num_image_tokens {counts['num_image_tokens']}, num_image_patches "
      f"{counts['num_image_patches']}; the prompt holds {placeholders} image tokens")
from vllm.model_executor.models.transformers.multimodal import MultiModalMixin  # noqa: E402

if isinstance(pooled, torch.Tensor):  # one tensor for all images (below 5.20.2): split by it
    print(f"   HF get_image_features: pooler_output Tensor {tuple(pooled.shape)}")
    rows = MultiModalMixin._split_embeddings(None, pooled, counts["num_image_patches"])
    print(f"   backend _split_embeddings(pooler_output, num_image_patches): rows per item "
          f"{[tuple(r.shape) for r in rows]} for {placeholders} placeholders")
else:  # one tensor per image, which the backend takes as it is
    rows = list(pooled)
    print(f"   HF get_image_features: pooler_output {type(pooled).__name__} of "
          f"{[tuple(r.shape) for r in rows]}, taken per image by the backend, for "
          f"{placeholders} placeholders")
reproduced |= rows[0].shape[0] != placeholders

# 2. the budget
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402
from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item  # noqa: E402

config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                     limit_mm_per_prompt={"image": 1})
budget = dict(get_mm_max_toks_per_item(MULTIMODAL_REGISTRY.create_processor(config),
                                       {"image": 1}, cache=None))["image"]
served = {f"{h}x{w}": processor._get_num_multimodal_tokens(image_sizes=[[h, w]])
          ["num_image_tokens"][0] for h, w in ((10000, 10000), (400, 400), (400, 51), (51, 400))}
print(f"2. backend budget per image {budget}; HF processor's tokens per image (HxW) {served}")
reproduced |= max(served.values()) > budget

# 3. one greedy step through the backend
print(f"3. HF model: the vision merger's mlp input is contiguous: {seen['contiguous']}")
llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
               limit_mm_per_prompt={"image": 1}, enforce_eager=True,
               kv_cache_memory_bytes=1 << 26)
try:
    out = llm.generate({"prompt": PROMPT, "multi_modal_data": {"image": [image]}},
                       vllm.SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)
    print(f"   backend generated {out[0].outputs[0].token_ids}")
except RuntimeError as error:
    print(f"   backend: {type(error).__name__}: {str(error).splitlines()[0]}")
    reproduced = True
sys.exit(1 if reproduced else 0)

# Measured 2026-12-03, vLLM 0.31.0 (.venv), transformers 5.17.0, CPU, on this project's tiny
# hunyuan_vl fixture built for 5.17.0 (16 px patches merged 2x2, 32x32..96x96 px):
#   1. HF processor: num_image_tokens [5], num_image_patches [8]; the prompt holds 5 image tokens
#      HF get_image_features: pooler_output Tensor (1, 5, 64)
#      backend _split_embeddings(pooler_output, num_image_patches): rows per item [(8, 64)] for
#      5 placeholders
#   2. backend budget per image 14; HF processor's tokens per image (HxW) {'10000x10000': 14,
#      '400x400': 14, '400x51': 18, '51x400': 11}
#   3. HF model: the vision merger's mlp input is contiguous: False
#      backend: RuntimeError: Expected a.stride(-1) == 1 to be true, but got false.  (exit 1)
# On transformers 5.20.2 and later get_image_features returns one tensor per image, so 1. no
# longer applies there (the backend takes per-image outputs as they are).
# On transformers 5.25.0 (the fixture built for it): 1. pooler_output is a tuple of [(5, 64)],
# taken per image by the backend (right); 2. and 3. as on 5.17.0 (budget 14 vs 400x51's 18; the
# merger's input not contiguous, the same RuntimeError)   (exit 1)
