"""Can vLLM's Transformers backend load a Mistral Large 4 checkpoint? (vLLM and transformers only.)

    python mistral_large4_backend.py CHECKPOINT

Mistral Large 4 (mistralai/Mistral-Large-4-1T-A52B) is stored in Mistral's own key layout:
transformers' conversion_mapping for mistral_large4 renames it on load (tok_embeddings,
layers.N.attention.wq, vision_encoder.*, ...) and its save_pretrained writes it back (the
fixture holds what transformers 5.25.0 writes). Among those rules, the vision tower's
attention.wq / attention.wk are not renamed but converted: a WeightConverter with
PermuteForRope (stored for interleaved RoPE, Pixtral's q_proj/k_proj expect rotate-half). The
backend maps checkpoint names through transformers' WeightRenamings only, so those two keys
reach no parameter. Readings, float32 on CPU, one prompt with one 96x64 image:
1. the checkpoint's vision-tower attention keys;
2. transformers' own load of the folder (missing and unexpected keys) and the HF model's top-5
   logprobs for the next token;
3. vLLM with model_impl="transformers": the class it resolves and what loading raises.
Exit 1 while 3. fails (reproduces).
"""

import gc
import os
import sys

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from safetensors import safe_open
from transformers import AutoProcessor

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
PROMPT = "[INST][IMG]What is in this image?[/INST]"
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (64, 96, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

with safe_open(os.path.join(path, "model.safetensors"), "pt") as weights:
    keys = sorted(weights.keys())
print(f"1. {len(keys)} keys; vision tower attention, layer 0:",
      [k for k in keys if k.startswith("vision_encoder.transformer.layers.0.attention.")])

model, info = transformers.MistralLarge4ForConditionalGeneration.from_pretrained(
    path, dtype=torch.float32, output_loading_info=True)
print(f"2. transformers loads it: missing {info['missing_keys']}, "
      f"unexpected {info['unexpected_keys']}")
processor = AutoProcessor.from_pretrained(path)
inputs = processor(text=PROMPT, images=[image], return_tensors="pt")
with torch.no_grad():
    logits = model(**inputs).logits[0, -1].float().log_softmax(-1)
top = logits.topk(5)
print("   HF top-5 next-token logprobs:",
      {int(t): round(float(v), 5) for t, v in zip(top.indices, top.values, strict=True)})
del model
gc.collect()

failed = False
llm = None
try:
    llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
                   limit_mm_per_prompt={"image": 1}, enforce_eager=True,
                   kv_cache_memory_bytes=1 << 26)
    print("3. class:", llm.llm_engine.model_config.architecture)
    out = llm.generate([{"prompt": PROMPT, "multi_modal_data": {"image": [image]}}],
                       vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5),
                       use_tqdm=False)
    print("   backend top-5:", {int(t): round(v.logprob, 5)
                                for t, v in out[0].outputs[0].logprobs[0].items()})
except Exception as error:  # the engine wraps the worker's error; its cause is the message
    cause = error
    while cause.__cause__ is not None:
        cause = cause.__cause__
    print(f"3. the backend fails: {type(cause).__name__}: {str(cause).splitlines()[0][:300]}")
    failed = True
sys.exit(1 if failed else 0)
