"""Can vLLM's Transformers backend serve Llama 4's images? (vLLM and transformers only)

    python llama4_unservable.py CHECKPOINT [transformers|vllm]

CHECKPOINT: meta-llama/Llama-4-Scout-17B-16E-Instruct, or this project's tiny one
(fixtures/recipes/llama4.py, not a registered fixture since the backend cannot serve it), built
with
    .venv/bin/python -c "from pathlib import Path; from fixtures.build import write_checkpoint;
    from fixtures.recipes.llama4 import RECIPE, make;
    write_checkpoint(RECIPE, make('tiny'), Path('/tmp/llama4'))"
(under `conformance exec --transformers V --` for another transformers version). The second
argument is vLLM's model_impl: "transformers" (the backend, the default: its MoE class,
TransformersMultiModalMoEForCausalLM) or "vllm" (vLLM's native mllama4, the control).

Readings:
1. transformers: the HF processor's ids for one image (<|patch|> positions, the model's
   image_token_index) and its pixel_values rows (the image's tiles plus its global tile, all
   in one batch dimension, with no per-image count beside them); whether Llama4Processor
   defines `_get_num_multimodal_tokens` (the backend sizes its image budget from it before an
   engine starts); what Llama4's get_image_features returns (pooler_output); the HF model's
   top-5 logprobs at the last position;
2. vLLM's model config and the multimodal registry's processor: the image's placeholder
   range, or what it raises;
3. an engine (model_impl as given, float32): one greedy step with the image, its top-5
   logprobs against the HF model's, or what it raises (the innermost frames of vLLM and
   transformers it came through).
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
from transformers import AutoProcessor, Llama4ForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
impl = sys.argv[2] if len(sys.argv) > 2 else "transformers"
PROMPT = ("<|begin_of_text|><|header_start|>user<|header_end|>\n\n<|image|>What is in this "
          "image?<|eot|><|header_start|>assistant<|header_end|>\n\n")
# wider than tall: two tiles side by side plus the global tile
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 112, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, model_impl {impl}")


def failure(error: BaseException) -> str:
    message = " ".join(str(error).split())
    text = f"{type(error).__name__}: " + (repr(message) if len(message) <= 240 else
                                          f"{message[:160]!r} ... {message[-60:]!r}")
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if "/vllm/" in f.filename or "/transformers/" in f.filename]
    where = [f"{f.filename.split('site-packages/')[-1].split('torch2.13.0/')[-1]}:{f.lineno} "
             f"({f.name})" for f in frames[-3:]]
    return text + (f" at {' <- '.join(reversed(where))}" if where else "")


# 1. transformers (before any engine: loading the backend decorates transformers' classes)
processor = AutoProcessor.from_pretrained(path)
inputs = processor(text=PROMPT, images=[image], return_tensors="pt", add_special_tokens=False)
ids = inputs["input_ids"][0].tolist()
model = Llama4ForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
patch_id = model.config.image_token_index
print(f"1. HF processor: {len(ids)} ids, {ids.count(patch_id)} image_token_index ({patch_id}, "
      f"{processor.tokenizer.convert_ids_to_tokens(patch_id)}); pixel_values "
      f"{list(inputs['pixel_values'].shape)} (rows: tiles and the global tile of one image); "
      f"keys {sorted(inputs)}; defines _get_num_multimodal_tokens: "
      f"{hasattr(processor, '_get_num_multimodal_tokens')}")
pixels = inputs["pixel_values"].float()
with torch.inference_mode():
    features = model.get_image_features(pixel_values=pixels,
                                        vision_feature_select_strategy="default")
    pooled = getattr(features, "pooler_output", None)
    hidden = getattr(features, "last_hidden_state", features)
    print(f"1. get_image_features -> {type(features).__name__}: last_hidden_state "
          f"{list(hidden.shape)}, pooler_output "
          f"{list(pooled.shape) if isinstance(pooled, torch.Tensor) else pooled}")
    logits = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                   pixel_values=pixels).logits
hf_logprobs = torch.log_softmax(logits[0, -1].float(), -1)
hf_top = torch.topk(hf_logprobs, 5)
hf_top = [(int(t), round(float(v), 5)) for v, t in zip(hf_top.values, hf_top.indices, strict=True)]
print(f"1. HF model's top-5 at the last position: {hf_top}")
del model

# 2. vLLM's model config and the registry's processor
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

model_config = ModelConfig(model=path, model_impl=impl, max_model_len=1024)
try:
    mm_processor = MULTIMODAL_REGISTRY.create_processor(model_config)
    out = mm_processor(PROMPT, mm_processor.info.parse_mm_data({"image": [image]}),
                       hf_processor_mm_kwargs={}, cache=None)
    ranges = [(r.offset, r.length) for r in out["mm_placeholders"]["image"]]
    print(f"2. vLLM resolves {model_config.architecture}; processor "
          f"{type(mm_processor).__name__}: {len(out['prompt_token_ids'])} ids, equal to the HF "
          f"processor's: {list(out['prompt_token_ids']) == ids}; image range (offset, length) "
          f"{ranges}")
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"2. vLLM resolves {model_config.architecture}; its processor: {failure(error)}")

# 3. an engine
served = False
try:
    llm = vllm.LLM(model=path, model_impl=impl, dtype="float32", max_model_len=1024,
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
