"""Can vLLM's Transformers backend load an ERNIE-4.5-VL-MoE checkpoint? (vLLM and transformers only)

    python ernie4_5_vl_moe_unservable.py CHECKPOINT [transformers|vllm]

CHECKPOINT: baidu/ERNIE-4.5-VL-28B-A3B-PT, or this project's tiny one
(fixtures/recipes/ernie4_5_vl_moe.py, not a registered fixture since the backend cannot load
it), built with
    .venv/bin/python -c "from pathlib import Path; from fixtures.build import write_checkpoint;
    from fixtures.recipes.ernie4_5_vl_moe import RECIPE, make;
    write_checkpoint(RECIPE, make('tiny'), Path('/tmp/ernie4_5_vl_moe'))"
(under `conformance exec --transformers V --` for another transformers version). The second
argument is vLLM's model_impl: "transformers" (the backend, the default) or "vllm" (vLLM's
native Ernie4_5_VLMoeForConditionalGeneration, written for the remote-code checkpoint).

transformers saves Ernie4_5_VLMoe in the checkpoint's original layout and converts it when it
loads: its conversion mapping (ErnieFuseAndSplitTextVisionExperts, a WeightConverter) splits
each sparse layer's one list of experts, model.layers.N.mlp.experts.E.* (text experts first,
then vision experts), into text_moe / vision_moe and fuses them, and splits mlp.gate.weight /
weight_1. Readings:
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
from transformers import AutoProcessor, Ernie4_5_VLMoeForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
impl = sys.argv[2] if len(sys.argv) > 2 else "transformers"
PROMPT = ("<|begin_of_sentence|>User: <|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>"
          "What is in this image?\nAssistant: ")
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (56, 84, 3), dtype=np.uint8))
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
listed = [k for k in keys if ".mlp.experts." in k or k.endswith("mlp.gate.weight_1")]
print(f"1. checkpoint: {len(keys)} tensors; {len(listed)} only a WeightConverter maps, e.g. "
      f"{listed[:2] + [k for k in listed if k.endswith('weight_1')][:1]}")
processor = AutoProcessor.from_pretrained(path)
inputs = processor(text=PROMPT, images=[image], return_tensors="pt")
ids = inputs["input_ids"][0].tolist()
model = Ernie4_5_VLMoeForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
mlp = model.model.language_model.layers[1].mlp
with torch.inference_mode():
    hf_logprobs = torch.log_softmax(model(**inputs).logits[0, -1].float(), -1)
hf_top = torch.topk(hf_logprobs, 5)
hf_top = [(int(t), round(float(v), 5)) for v, t in zip(hf_top.values, hf_top.indices, strict=True)]
print(f"1. HF processor: {len(ids)} ids; HF model (layer 1's experts: "
      f"{sorted(n for n, _ in mlp.named_parameters() if 'experts' in n)[:4]}) top-5 at the last "
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
                   limit_mm_per_prompt={"image": 1, "video": 0})
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
