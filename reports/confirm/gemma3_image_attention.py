"""Do vLLM's implementations of Gemma 3 attend within an image as transformers does? (vLLM and
transformers only.)

    python gemma3_image_attention.py CHECKPOINT

transformers' Gemma3ForConditionalGeneration takes the processor's `token_type_ids` and lets
the tokens of one image attend to each other both ways (its mask marks image tokens with type
1); without them it attends causally. One greedy step on a prompt with one image, float32 on
CPU: the HF model's top-5 logprobs with its processor's token_type_ids and without them, and
native vLLM's (`model_impl="vllm"`), then the Transformers backend's.
Exit 1: native vLLM's logprobs are not the HF model's (reproduces); their matching the HF model
fed no token_type_ids shows the cause.
"""

import os
import sys

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor, Gemma3ForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
PROMPT = "<bos><start_of_turn>user\nLook: <start_of_image> What is it?<end_of_turn>\n"
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

model = Gemma3ForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
inputs = AutoProcessor.from_pretrained(path)(text=PROMPT, images=[image], return_tensors="pt")
print(f"HF processor outputs: {sorted(inputs)}; image tokens marked in token_type_ids: "
      f"{int(inputs['token_type_ids'].sum())}")


def top5(logits):
    top = torch.log_softmax(logits[0, -1].float(), -1).topk(5)
    return {int(t): round(float(v), 6) for t, v in zip(top.indices, top.values, strict=True)}


with torch.inference_mode():
    hf = top5(model(**inputs).logits)
    causal = top5(model(**{k: v for k, v in inputs.items() if k != "token_type_ids"}).logits)


def served(impl):
    llm = vllm.LLM(model=path, model_impl=impl, dtype="float32", max_model_len=1024,
                   limit_mm_per_prompt={"image": 1}, enforce_eager=True)
    out = llm.generate({"prompt": PROMPT, "multi_modal_data": {"image": [image]}},
                       vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5),
                       use_tqdm=False)[0]
    del llm
    return len(out.prompt_token_ids), {int(t): round(float(v.logprob), 6)
                                       for t, v in out.outputs[0].logprobs[0].items()}


native_len, native = served("vllm")
backend_len, backend = served("transformers")
print(f"HF model, token_type_ids     {hf}  ({inputs['input_ids'].shape[1]} prompt tokens)")
print(f"HF model, no token_type_ids  {causal}")
print(f"native vLLM                  {native}  ({native_len} prompt tokens)")
print(f"vLLM Transformers backend    {backend}  ({backend_len} prompt tokens)")


def gap(a, b):
    return max(abs(a[t] - b[t]) for t in a if t in b)


print(f"native vs HF {gap(hf, native):.3e}; native vs HF without token_type_ids "
      f"{gap(causal, native):.3e}; backend vs HF {gap(hf, backend):.3e}; backend vs HF "
      f"without token_type_ids {gap(causal, backend):.3e}")
sys.exit(1 if gap(hf, native) > 1e-4 else 0)

# Measured 2026-12-03, vLLM 0.31.0 (.venv), transformers 5.17.0, on this project's tiny gemma3
# fixture built for 5.17.0 (this prompt's ids agree between the two vLLM implementations):
#   HF processor outputs: ['attention_mask', 'input_ids', 'pixel_values', 'token_type_ids']; image
#     tokens marked in token_type_ids: 4
#   HF model, token_type_ids     {142: -5.413596, 231: -5.453829, 275: -5.51223, 166: -5.523374,
#     113: -5.538167}  (29 prompt tokens)
#   HF model, no token_type_ids  {142: -5.412193, 231: -5.45159, 275: -5.512205, 166: -5.522135,
#     113: -5.539156}
#   native vLLM                  {142: -5.412193, 231: -5.45159, 275: -5.512205, 166: -5.522135,
#     113: -5.539156}  (29 prompt tokens)
#   vLLM Transformers backend    {142: -5.412193, 231: -5.45159, 275: -5.512205, 166: -5.522135,
#     113: -5.539156}  (29 prompt tokens)
#   native vs HF 2.239e-03; native vs HF without token_type_ids 0.000e+00; backend vs HF
#     2.239e-03; backend vs HF without token_type_ids 0.000e+00   (exit 1)
