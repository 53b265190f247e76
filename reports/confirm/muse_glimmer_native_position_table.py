"""Does native vLLM's Muse Glimmer read its vision position table as transformers does? (vLLM and
transformers only.)

    python muse_glimmer_native_position_table.py CHECKPOINT

CHECKPOINT: meta-models/Muse-Glimmer-30B, or this project's tiny one (fixtures/recipes/
muse_glimmer.py). Run it under two transformers versions (5.22.2 and 5.25.0) with one vLLM.

transformers 5.25.0 changed MuseGlimmerVisionPatchEmbedder: patch (h, w) now reads the
interpolated position table at (w, h) (`grid_thw[:, [0, 2, 1]]`, its comment: the reference code
passes meshgrid(pos_h, pos_w, indexing="xy") to grid_sample, which takes the first coordinate as
the width); 5.22.2 and earlier read it at (h, w). One greedy step, float32 on CPU, text only and
with one 40x56 image: the HF model's top-5 logprobs and native vLLM's (model_impl="vllm").
Exit 1 when they differ with the image (reproduces: on 5.25.0 only, text-only agreeing).
"""

import os
import sys

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor, MuseGlimmerForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
TEXT = ("<|begin_of_text|><|start|>user<|message|>{}What is in this image?<|eot|>"
        "<|start|>assistant<|message|>")
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
cases = {"text only": (TEXT.format(""), []), "one image": (TEXT.format("<|patch|>"), [image])}


def top5(values):
    top = torch.log_softmax(values.float(), -1).topk(5)
    return {int(t): round(float(v), 6) for t, v in zip(top.indices, top.values, strict=True)}


model = MuseGlimmerForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
processor = AutoProcessor.from_pretrained(path)
hf = {}
for name, (prompt, images) in cases.items():
    inputs = processor(text=prompt, images=images or None, return_tensors="pt")
    with torch.inference_mode():
        hf[name] = top5(model(**inputs).logits[0, -1])
del model

# a 64x64 dummy image for the profiling run (the checkpoint's 4096-token one is slow on CPU)
llm = vllm.LLM(model=path, model_impl="vllm", dtype="float32", max_model_len=1024,
               max_num_batched_tokens=1024, kv_cache_memory_bytes=1 << 26, enforce_eager=True,
               limit_mm_per_prompt={"image": {"count": 1, "width": 64, "height": 64}})
gaps = {}
for name, (prompt, images) in cases.items():
    request = {"prompt": prompt}
    if images:
        request["multi_modal_data"] = {"image": images}
    out = llm.generate(request, vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5),
                       use_tqdm=False)[0].outputs[0]
    native = {int(t): round(float(v.logprob), 6) for t, v in out.logprobs[0].items()}
    gaps[name] = max(abs(hf[name][t] - native[t]) for t in hf[name] if t in native)
    print(f"{name}: HF model     top-5 logprobs {hf[name]}")
    print(f"{name}: native vLLM  top-5 logprobs {native}")
    print(f"{name}: largest difference {gaps[name]:.3e}")
sys.exit(1 if gaps["one image"] > 1e-4 else 0)
