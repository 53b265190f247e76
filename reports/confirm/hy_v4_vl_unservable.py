"""Can vLLM's Transformers backend serve HY4-VL's images? (vLLM and transformers only)

    python hy_v4_vl_unservable.py CHECKPOINT

CHECKPOINT: tencent/Hy4, or this project's tiny one (fixtures/recipes/hy_v4_vl.py, not a
registered fixture since the backend cannot serve it), built with
    .venv/bin/conformance exec --transformers 5.25.0 -- .venv/bin/python -c "from pathlib import
    Path; from fixtures.build import write_checkpoint; from fixtures.recipes.hy_v4_vl import
    RECIPE, make; write_checkpoint(RECIPE, make('tiny'), Path('/tmp/hy_v4_vl'))"

HY-V4's text attention is multi-head latent attention with a DSA indexer: each layer's
attention module runs the indexer on the attention mask it is given (`attention_mask[:, 0, :,
:]`), turns its top-k picks into that mask (eager / SDPA) and passes per-head sinks (`s_aux`)
to the attention interface. The backend routes the attention interface to vLLM's paged
attention, which takes no mask. Readings:
1. transformers: the text config's attention fields; the HF model's top-5 logprobs of the last
   position of a prompt holding one image;
2. vLLM's model config: the class it resolves;
3. an engine (the backend, float32): one greedy step with the image against the HF model's
   logprobs, or what starting it or the step raises (with the frame that raised).
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
from transformers import AutoModelForImageTextToText, AutoProcessor

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (48, 64, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, model_impl transformers")


def failure(error: BaseException) -> str:
    message = str(error)
    text = f"{type(error).__name__}: " + (repr(message) if len(message) <= 300 else
                                          f"{message[:200]!r} ... {message[-80:]!r}")
    chain, cause = [], error
    while cause is not None:  # the innermost frame that raised, through causes
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    frames = traceback.extract_tb(chain[-1].__traceback__)
    where = f" at {frames[-1].filename.split('site-packages/')[-1]}:{frames[-1].lineno} " \
        f"({frames[-1].line})" if frames else ""
    inner = f" [innermost: {type(chain[-1]).__name__}: {str(chain[-1])[:200]!r}]" \
        if len(chain) > 1 else ""
    return text + inner + where


# 1. transformers
processor = AutoProcessor.from_pretrained(path)
tok = processor.tokenizer
prompt = f"{tok.bos_token}{processor.image_token}What is in this image?"
inputs = processor(text=prompt, images=[image], return_tensors="pt")
model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
text = model.config.get_text_config()
print(f"1. {type(model).__name__}; text config: layer_types {text.layer_types}, indexer_types "
      f"{text.indexer_types}, q_lora_rank {text.q_lora_rank}, kv_lora_rank {text.kv_lora_rank}, "
      f"qk_nope/qk_rope/v head dims {text.qk_nope_head_dim}/{text.qk_rope_head_dim}/"
      f"{text.v_head_dim}, head_dim {text.head_dim}, hc_mult {text.hc_mult}")
with torch.inference_mode():
    hf_logprobs = torch.log_softmax(model(**inputs).logits[0, -1].float(), -1)
hf_top = torch.topk(hf_logprobs, 5)
hf_top = [(int(t), round(float(v), 5)) for v, t in zip(hf_top.values, hf_top.indices, strict=True)]
print(f"1. HF processor: {inputs['input_ids'].shape[1]} ids; HF model's top-5 at the last "
      f"position: {hf_top}")
del model

# 2. vLLM's model config
from vllm.config import ModelConfig  # noqa: E402

model_config = ModelConfig(model=path, model_impl="transformers", max_model_len=1024)
print(f"2. vLLM resolves {model_config.architecture}")

# 3. an engine
served = False
try:
    llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
                   enforce_eager=True, kv_cache_memory_bytes=1 << 26,
                   limit_mm_per_prompt={"image": 1})
    result = llm.generate({"prompt": prompt, "multi_modal_data": {"image": [image]}},
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
