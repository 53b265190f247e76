"""Does vLLM's Transformers backend encode an Aria image on the CPU? (vLLM and transformers only.)

    VLLM_TARGET_DEVICE=cpu python aria_projector_out_proj.py CHECKPOINT

Aria's projector (transformers' AriaProjector) cross-attends with a torch.nn.MultiheadAttention,
whose forward does not call its `out_proj` module: it hands `out_proj.weight` and
`out_proj.bias` to `F.multi_head_attention_forward`, which multiplies by them itself. The
backend replaces every nn.Linear of the HF model by a vLLM linear layer, `out_proj` (an
nn.Linear subclass) among them; on the CPU, vLLM's `dispatch_cpu_unquantized_gemm`
(model_executor/layers/utils.py) packs a linear layer's weight for its own GEMM kernel and
replaces `layer.weight` with an empty tensor (`remove_weight`). Readings, float32 on CPU, one
prompt with one 96x64 image:
1. the backend's model: each MultiheadAttention, the class of its out_proj and its parameters'
   shapes;
2. a text-only prompt through the backend (no image: the projector does not run; below
   transformers 5.18 its MoE blocks call the experts as `experts(hidden_states, router_logits)`,
   which the backend's TransformersMoERunner, taking (hidden_states, topk_ids, topk_weights),
   refuses);
3. the image prompt through the backend: its error, and the statement that raised it;
4. native vLLM on the same prompt (its own Aria projector).
Exit 1 while 3. fails (reproduces). vLLM 0.31.0 stops earlier (reports/confirm/aria_moe_top_k.py:
its backend does not read Aria's top-k), so run it on vLLM 0.33.0 or later.
"""

import gc
import os
import sys
import traceback

import numpy as np
import torch
import transformers
import vllm
from PIL import Image

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 96, 3), dtype=np.uint8))
processor = transformers.AutoProcessor.from_pretrained(path)
PROMPT = processor.apply_chat_template(
    [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Describe."}]}],
    add_generation_prompt=True, tokenize=False)
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def cause_of(error: BaseException) -> str:
    while error.__cause__ is not None:
        error = error.__cause__
    frame = traceback.extract_tb(error.__traceback__)[-1]
    where = f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno}: {frame.line}"
    return f"{type(error).__name__}: {str(error).splitlines()[0]} (raised at {where})"


def attention_modules(model):
    return [(name, type(module.out_proj).__name__,
             {n: tuple(p.shape) for n, p in module.named_parameters()})
            for name, module in model.named_modules()
            if isinstance(module, torch.nn.MultiheadAttention)]


def engine(impl):
    return vllm.LLM(model=path, model_impl=impl, dtype="float32", max_model_len=1024,
                    limit_mm_per_prompt={"image": 1}, enforce_eager=True,
                    kv_cache_memory_bytes=1 << 26)


def greedy(llm, prompt):
    try:
        out = llm.generate([prompt], vllm.SamplingParams(temperature=0.0, max_tokens=2),
                           use_tqdm=False)
        return list(out[0].outputs[0].token_ids)
    except Exception as error:  # the engine may wrap the worker's error; its cause says it
        return cause_of(error)


backend = engine("transformers")
for row in backend.apply_model(attention_modules):
    print("1. backend's", row)
print("2. backend, text only:", greedy(backend, {"prompt": "Hello world"}))
with_image = {"prompt": PROMPT, "multi_modal_data": {"image": image}}
stored = greedy(backend, with_image)
print("3. backend, one image:", stored)
del backend
gc.collect()
print("4. native vLLM, one image:", greedy(engine("vllm"), with_image))

reproduces = isinstance(stored, str) and "mat2 must be a matrix" in stored
print("REPRODUCES: the backend cannot run Aria's projector (out_proj's weight emptied)"
      if reproduces else "DOES NOT REPRODUCE")
sys.exit(1 if reproduces else 0)
