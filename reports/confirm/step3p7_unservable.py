"""Can vLLM's Transformers backend load a Step-3.7-Flash checkpoint? (vLLM and transformers only)

    python step3p7_unservable.py CHECKPOINT [transformers|vllm]

CHECKPOINT: stepfun-ai/Step-3.7-Flash, or this project's tiny one (fixtures/recipes/step3p7.py,
not a registered fixture since the backend cannot load it), built with
    .venv/bin/python -c "from pathlib import Path; from fixtures.build import write_checkpoint;
    from fixtures.recipes.step3p7 import RECIPE, make;
    write_checkpoint(RECIPE, make('tiny'), Path('/tmp/step3p7'))"
(under `conformance exec --transformers V --` for another transformers version). The second
argument is vLLM's model_impl: "transformers" (the backend, the default) or "vllm" (vLLM's
native Step3p7ForConditionalGeneration, the control).

transformers saves Step3p7 in the hub's (remote-code) layout and converts it when it loads: its
conversion mapping renames keys (WeightRenaming) and, through WeightConverters, splits each ViT
layer's fused attn.in_proj_weight into q/k/v (Chunk, then PermuteForRope on q and k) and
concatenates each MoE layer's moe.gate_proj / moe.up_proj into experts.gate_up_proj. Readings:
1. the checkpoint's keys that only a WeightConverter maps; the HF model's top-5 logprobs of the
   last position of a prompt holding one image (transformers' own loading);
2. vLLM's model config: the class it resolves;
3. an engine (model_impl as given, float32): one greedy step with the image against the HF
   model's logprobs, or what starting it raises.
Exit 1 when the engine cannot serve the image (reproduces); 0 when it serves it.
"""

import os
import sys
import traceback

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from safetensors import safe_open
from transformers import AutoProcessor, Step3p7ForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
impl = sys.argv[2] if len(sys.argv) > 2 else "transformers"
PROMPT = "User: <im_patch>What is in this image?\nAssistant:"
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, model_impl {impl}")


def failure(error: BaseException) -> str:
    message = str(error)
    text = f"{type(error).__name__}: " + (repr(message) if len(message) <= 300 else
                                          f"{message[:200]!r} ... {message[-80:]!r}")
    frames = traceback.extract_tb(error.__traceback__)
    where = f" at {frames[-1].filename.split('site-packages/')[-1]}:{frames[-1].lineno}" \
        if frames else ""
    return text + where


# 1. the checkpoint and transformers
with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
    keys = sorted(f.keys())
fused = [k for k in keys if k.endswith("attn.in_proj_weight") or ".moe.gate_proj" in k
         or ".moe.up_proj" in k]
print(f"1. checkpoint: {len(keys)} tensors; {len(fused)} only a WeightConverter maps, e.g. "
      f"{[k for k in fused if 'in_proj' in k][:1] + [k for k in fused if '.moe.' in k][:2]}")
processor = AutoProcessor.from_pretrained(path)
inputs = processor(text=PROMPT, images=[image], return_tensors="pt")
ids = inputs["input_ids"][0].tolist()
model = Step3p7ForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
with torch.inference_mode():
    hf_logprobs = torch.log_softmax(model(**inputs).logits[0, -1].float(), -1)
hf_top = torch.topk(hf_logprobs, 5)
hf_top = [(int(t), round(float(v), 5)) for v, t in zip(hf_top.values, hf_top.indices, strict=True)]
print(f"1. HF processor: {len(ids)} ids; HF model (its q/k/v: "
      f"{type(model.model.vision_model.layers[0].self_attn.q_proj).__name__}) top-5 at the last "
      f"position: {hf_top}")
del model

# 2. vLLM's model config
from vllm.config import ModelConfig  # noqa: E402

model_config = ModelConfig(model=path, model_impl=impl, max_model_len=4096)
print(f"2. vLLM resolves {model_config.architecture}")

# 3. an engine
served = False
try:
    llm = vllm.LLM(model=path, model_impl=impl, dtype="float32", max_model_len=4096,
                   enforce_eager=True, kv_cache_memory_bytes=1 << 26,
                   limit_mm_per_prompt={"image": 1})
    result = llm.generate({"prompt": PROMPT, "multi_modal_data": {"image": [image]}},
                          vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5),
                          use_tqdm=False)[0]
    top = {int(t): float(v.logprob) for t, v in result.outputs[0].logprobs[0].items()}
    gap = max(abs(float(hf_logprobs[t]) - v) for t, v in top.items())
    served = True
    print(f"3. engine: served, {len(result.prompt_token_ids)} prompt ids; top-5 "
          f"{sorted(top.items(), key=lambda kv: -kv[1])}; largest difference from the HF "
          f"model's logprobs {gap:.3e}")
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"3. engine: {failure(error)}")
    if os.environ.get("TRACEBACK"):
        traceback.print_exc()
sys.exit(0 if served else 1)
