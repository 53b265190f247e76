"""Can vLLM's Transformers backend load an Aria checkpoint? (vLLM and transformers only.)

    python aria_moe_top_k.py CHECKPOINT

Aria (rhymes-ai/Aria) is a multimodal MoE: its text config (AriaTextConfig) says how many
experts each token is routed to as `moe_topk` (and the expert count as `moe_num_experts`). vLLM
reads `moe_num_experts` as the expert count (so model_impl="transformers" picks the backend's
MoE class), but the backend's MoE mixin looks the top-k up under `num_experts_per_tok` and
`top_k` only (vllm/model_executor/models/transformers/moe.py, `recursive_replace`) and asserts
it found one: `assert top_k is not None` raises a bare AssertionError while the engine loads
the model. Native vLLM's Aria reads `config.moe_topk`. Readings, float32 on CPU, one prompt with
one 96x64 image:
1. the text config's MoE fields;
2. the HF model's top-5 logprobs for the next token, and native vLLM's;
3. the backend loading the checkpoint as stored (the error, and the statement that raised it);
4. the backend on a copy whose text_config also says num_experts_per_tok = moe_topk: whether it
   then loads and scores as the HF model does.
Exit 1 while 3. fails (reproduces).
"""

import gc
import json
import os
import shutil
import sys
import tempfile
import traceback

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AriaForConditionalGeneration, AutoProcessor

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
PROMPT = ("<|im_start|>user\n<fim_prefix><|img|><fim_suffix>What is in this image?<|im_end|>\n"
          "<|im_start|>assistant\n")
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (64, 96, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def top5(logprobs):
    return {int(t): round(float(v), 5) for t, v in logprobs.items()}


def greedy_step(folder, impl):
    """The top-5 logprobs of one greedy step on PROMPT, or the error loading or running
    raised (with the statement that raised it, where the message is empty)."""
    llm = None
    try:
        llm = vllm.LLM(model=folder, model_impl=impl, dtype="float32", max_model_len=1024,
                       limit_mm_per_prompt={"image": 1}, enforce_eager=True,
                       kv_cache_memory_bytes=1 << 26)
        out = llm.generate([{"prompt": PROMPT, "multi_modal_data": {"image": [image]}}],
                           vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5),
                           use_tqdm=False)
        return top5({t: v.logprob for t, v in out[0].outputs[0].logprobs[0].items()})
    except Exception as error:  # the engine may wrap the worker's error; its cause says it
        cause = error
        while cause.__cause__ is not None:
            cause = cause.__cause__
        frame = traceback.extract_tb(cause.__traceback__)[-1]
        where = f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno}: {frame.line}"
        return f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''} " \
               f"(raised at {where})"
    finally:
        del llm
        gc.collect()


config = json.load(open(os.path.join(path, "config.json")))
text = config["text_config"]
print("1. text_config:", {k: text.get(k) for k in (
    "moe_num_experts", "moe_topk", "moe_num_shared_experts", "num_experts_per_tok", "top_k")})

processor = AutoProcessor.from_pretrained(path)
inputs = processor(text=[PROMPT], images=[image], return_tensors="pt")
model = AriaForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
with torch.no_grad():
    logprobs = model(**inputs).logits[0, -1].log_softmax(-1)
values, ids = logprobs.topk(5)
hf = top5(dict(zip(ids.tolist(), values.tolist(), strict=True)))
del model
gc.collect()
print("2. HF model:   ", hf)
print("   native vLLM:", greedy_step(path, "vllm"))

stored = greedy_step(path, "transformers")
print("3. backend, checkpoint as stored:", stored)

with tempfile.TemporaryDirectory() as tmp:
    copy = os.path.join(tmp, "aria")
    shutil.copytree(path, copy)
    config["text_config"]["num_experts_per_tok"] = text["moe_topk"]
    json.dump(config, open(os.path.join(copy, "config.json"), "w"), indent=2)
    print("4. backend, text_config.num_experts_per_tok added:", greedy_step(copy, "transformers"))

# the top-k assertion, not what fails once the model loads (vLLM 0.33.0 reads moe_topk and
# then fails in the projector: reports/confirm/aria_projector_out_proj.py)
reproduces = not isinstance(stored, dict) and "assert top_k is not None" in str(stored)
print("REPRODUCES: the backend cannot load Aria (top-k unread)" if reproduces
      else "DOES NOT REPRODUCE: the backend reads Aria's top-k as stored")
sys.exit(1 if reproduces else 0)
