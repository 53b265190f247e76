"""Can vLLM's Transformers backend serve Inkling-2's images? (vLLM and transformers only)

    python inkling2_unservable.py CHECKPOINT

CHECKPOINT: an Inkling2ForConditionalGeneration (thinkingmachines/Inkling-2-Small-MXFP8) or
Inkling2LoopForConditionalGeneration (thinkingmachines/Inkling-2-Mini) checkpoint, or this
project's tiny ones (fixtures/recipes/inkling2.py, inkling2_loop.py, not registered fixtures
since the backend cannot serve them), built with
    .venv/bin/conformance exec --transformers 5.25.0 -- .venv/bin/python -c "from pathlib import
    Path; from fixtures.build import write_checkpoint; from fixtures.recipes import inkling2;
    write_checkpoint(inkling2.RECIPE, inkling2.make('tiny'), Path('/tmp/inkling2'))"
(inkling2_loop the same way).

Inkling-2's text layers do more through transformers' attention interface than attend over the
sequence: keys and values pass through short causal convolutions, the scores add a learned
relative position bias and per-token sinks (`position_bias`, `sinks`), and an attention-residual
block mixer calls the interface over the stacked block states of each position
(Inkling2BlockAttentionResidual: a module that is no attention layer of the sequence). The
backend routes the interface to vLLM's paged attention. Readings:
1. transformers: the text config's layer fields; the HF model's top-5 logprobs of the last
   position of a prompt holding one image;
2. vLLM's model config: the class it resolves;
3. an engine (the backend, float32): one greedy step with the image against the HF model's
   logprobs, or what starting it or the step raises (with the frame that raised);
4. what-if, where 3 stops at the processor's token count: the engine again with
   Inkling2Processor given a `_get_num_multimodal_tokens` (one token and one pixel_values row per
   40x40 tile, as its replace_image_token and image processor make them).
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
prompt = f"User: {processor.image_token}What is in this image?\nAssistant:"
inputs = processor(text=prompt, images=[image], return_tensors="pt")
model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
text = model.config.get_text_config()
loop = {k: getattr(text, k) for k in ("loop_layer_index_start", "loop_layer_index_end",
                                      "loop_num_passes") if hasattr(text, k)}
print(f"1. {type(model).__name__}; text config: layer_types {text.layer_types}, "
      f"n_layers_per_attn_res_block {text.n_layers_per_attn_res_block}, conv_kernel_size "
      f"{text.conv_kernel_size}, experts {text.n_routed_experts} ({text.num_experts_per_tok} per "
      f"token){', loop ' + str(loop) if loop else ''}")
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
message = ""
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
    message = failure(error)
    print(f"3. engine: {message}")
    if os.environ.get("TRACEBACK"):
        traceback.print_exc()

if not served and "_get_num_multimodal_tokens" in message:
    import math  # noqa: E402

    from transformers.processing_utils import MultiModalData  # noqa: E402

    def count(self, image_sizes=None, **kwargs):
        tile = self.image_processor.size
        tiles = [math.ceil(h / tile["height"]) * math.ceil(w / tile["width"])
                 for h, w in image_sizes or []]
        return MultiModalData(num_image_tokens=tiles, num_image_patches=tiles)

    type(processor)._get_num_multimodal_tokens = count
    try:
        llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32",
                       max_model_len=1024, enforce_eager=True, kv_cache_memory_bytes=1 << 26,
                       limit_mm_per_prompt={"image": 1})
        result = llm.generate({"prompt": prompt, "multi_modal_data": {"image": [image]}},
                              vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5),
                              use_tqdm=False)[0]
        top = {int(t): float(v.logprob) for t, v in result.outputs[0].logprobs[0].items()}
        gap = max(abs(float(hf_logprobs[t]) - v) for t, v in top.items())
        print(f"4. what-if engine: served; top-5 {sorted(top.items(), key=lambda kv: -kv[1])}; "
              f"largest difference from the HF model's logprobs {gap:.3e}")
    except Exception as error:  # noqa: BLE001 - what it raises is the reading
        print(f"4. what-if engine: {failure(error)}")
        if os.environ.get("TRACEBACK"):
            traceback.print_exc()
sys.exit(0 if served else 1)
