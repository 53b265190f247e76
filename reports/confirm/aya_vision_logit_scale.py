"""Does vLLM's Transformers backend score Aya Vision's tokens as transformers does? (vLLM and
transformers only.)

    python aya_vision_logit_scale.py CHECKPOINT

Aya Vision's text model is Cohere2, whose config carries `logit_scale` (Cohere2Config's default
0.0625). transformers' Cohere2ForCausalLM multiplies its logits by it; AyaVisionForConditional
Generation does not (its forward returns `lm_head(hidden_states)`). vLLM's Transformers backend
builds its logits processor with `scale=text_config.logit_scale` for every model it serves.
One greedy step on a prompt with one image, float32 on CPU: the HF model's top-5 logprobs, the
backend's, and the HF model's logits multiplied by `logit_scale`.
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
from transformers import AutoProcessor, AyaVisionForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
PROMPT = ("<|START_OF_TURN_TOKEN|><|USER_TOKEN|><image>What is in this image?"
          "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>")
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

model = AyaVisionForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
scale = model.config.text_config.logit_scale
inputs = AutoProcessor.from_pretrained(path)(text=PROMPT, images=[image], return_tensors="pt")
with torch.inference_mode():
    logits = model(**inputs).logits[0, -1].float()


def top5(values):
    top = torch.log_softmax(values, -1).topk(5)
    return {int(t): round(float(v), 6) for t, v in zip(top.indices, top.values, strict=True)}


hf, hf_scaled = top5(logits), top5(logits * scale)
llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
               limit_mm_per_prompt={"image": 1}, enforce_eager=True)
out = llm.generate({"prompt": PROMPT, "multi_modal_data": {"image": [image]}},
                   vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5),
                   use_tqdm=False)[0].outputs[0]
backend = {int(t): round(float(v.logprob), 6) for t, v in out.logprobs[0].items()}
print(f"text_config.logit_scale = {scale}")
print(f"HF model             top-5 logprobs {hf}")
print(f"HF logits * scale    top-5 logprobs {hf_scaled}")
print(f"vLLM backend         top-5 logprobs {backend}")
worst = max(abs(hf[t] - backend[t]) for t in hf if t in backend)
scaled = max(abs(hf_scaled[t] - backend[t]) for t in hf_scaled if t in backend)
print(f"largest difference vs the HF model {worst:.3e}; vs the HF logits * scale {scaled:.3e}")
sys.exit(1 if worst > 1e-4 else 0)

# Measured 2026-12-03, vLLM 0.31.0 (.venv), transformers 5.17.0, on this project's tiny
# aya_vision fixture built for 5.17.0 (Cohere2 text config, logit_scale 0.0625):
#   text_config.logit_scale = 0.0625
#   HF model             top-5 logprobs {331: -4.807105, 218: -5.418959, 202: -5.430223, 327:
#     -5.444933, 138: -5.520258}
#   HF logits * scale    top-5 logprobs {331: -5.761521, 218: -5.799762, 202: -5.800466, 327:
#     -5.801385, 138: -5.806093}
#   vLLM backend         top-5 logprobs {331: -5.761521, 218: -5.799762, 202: -5.800466, 327:
#     -5.801385, 138: -5.806093}
#   largest difference vs the HF model 9.544e-01; vs the HF logits * scale 0.000e+00   (exit 1)
# On transformers 5.25.0 (the fixture built for it), AyaVisionForConditionalGeneration scales its
# logits by text_config.logit_scale as the backend does:
#   HF model             top-5 logprobs {331: -5.761521, 218: -5.799762, 202: -5.800466, 327:
#     -5.801385, 138: -5.806093}
#   vLLM backend         top-5 logprobs {331: -5.761521, 218: -5.799762, 202: -5.800466, 327:
#     -5.801385, 138: -5.806093}
#   largest difference vs the HF model 0.000e+00; vs the HF logits * scale 6.045e-02   (exit 0)
