"""Does vLLM's Transformers backend score Muse Glimmer's tokens as transformers does? (vLLM and
transformers only.)

    python muse_glimmer_output_multiplier.py CHECKPOINT

CHECKPOINT: meta-models/Muse-Glimmer-30B, or this project's tiny one (fixtures/recipes/
muse_glimmer.py).

transformers' MuseGlimmerForConditionalGeneration multiplies the lm_head's logits by
text_config.output_multiplier (0.196 = 1/sqrt(6656/256) on the released checkpoint) before its
tanh soft-cap: T * tanh(logits * multiplier / T), T = final_logit_softcapping (20). vLLM's
Transformers backend builds its logits processor with scale=text_config.logit_scale (absent:
1.0) and soft_cap=final_logit_softcapping (transformers/causal.py), so it never reads
output_multiplier. One greedy step, float32 on CPU, text only and with one image: the HF model's
top-5 logprobs, the backend's, and the HF model's own lm_head logits soft-capped WITHOUT the
multiplier (T * tanh(logits / T), what the backend computes).
Exit 1: the backend's logprobs are not the HF model's (reproduces); the third row matching the
backend's shows the cause.
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

model = MuseGlimmerForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
text_config = model.config.text_config
cap, multiplier = text_config.final_logit_softcapping, text_config.output_multiplier
print(f"text_config: output_multiplier {multiplier}, final_logit_softcapping {cap}, "
      f"logit_scale {getattr(text_config, 'logit_scale', 'absent')}")
processor = AutoProcessor.from_pretrained(path)
raw = {}
model.lm_head.register_forward_hook(lambda module, args, out: raw.__setitem__("logits", out))


def top5(values):
    top = torch.log_softmax(values.float(), -1).topk(5)
    return {int(t): round(float(v), 6) for t, v in zip(top.indices, top.values, strict=True)}


cases = {"text only": (TEXT.format(""), []), "one image": (TEXT.format("<|patch|>"), [image])}
reference = {}
for name, (prompt, images) in cases.items():
    inputs = processor(text=prompt, images=images or None, return_tensors="pt")
    with torch.inference_mode():
        logits = model(**inputs).logits[0, -1]
    lm_head = raw["logits"][0, -1]
    reference[name] = (top5(logits), top5(cap * torch.tanh(lm_head / cap)))
del model

# a 64x64 dummy image for the profiling run (the checkpoint's 4096-token one is slow on CPU)
llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
               max_num_batched_tokens=1024, kv_cache_memory_bytes=1 << 26, enforce_eager=True,
               limit_mm_per_prompt={"image": {"count": 1, "width": 64, "height": 64}})
worst = 0.0
for name, (prompt, images) in cases.items():
    request = {"prompt": prompt}
    if images:
        request["multi_modal_data"] = {"image": images}
    out = llm.generate(request, vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5),
                       use_tqdm=False)[0].outputs[0]
    backend = {int(t): round(float(v.logprob), 6) for t, v in out.logprobs[0].items()}
    hf, unscaled = reference[name]
    gap = max(abs(hf[t] - backend[t]) for t in hf if t in backend)
    off = max(abs(unscaled[t] - backend[t]) for t in unscaled if t in backend)
    worst = max(worst, gap)
    print(f"{name}: HF model                        top-5 logprobs {hf}")
    print(f"{name}: HF lm_head, capped, no multiplier top-5 logprobs {unscaled}")
    print(f"{name}: vLLM backend                    top-5 logprobs {backend}")
    print(f"{name}: largest difference vs the HF model {gap:.3e}; vs no multiplier {off:.3e}")
sys.exit(1 if worst > 1e-4 else 0)
