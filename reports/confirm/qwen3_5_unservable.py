"""Can vLLM's Transformers backend serve Qwen3.5's images? (vLLM and transformers only)

    python qwen3_5_unservable.py CHECKPOINT [transformers|vllm]

CHECKPOINT: Qwen/Qwen3.5-2B, or this project's tiny one (fixtures/recipes/qwen3_5.py, not a
registered fixture since the backend cannot serve it), built with
    .venv/bin/python -c "from pathlib import Path; from fixtures.build import write_checkpoint;
    from fixtures.recipes.qwen3_5 import RECIPE, make;
    write_checkpoint(RECIPE, make('tiny'), Path('/tmp/qwen3_5'))"
(under `conformance exec --transformers V --` for another transformers version). The second
argument is vLLM's model_impl: "transformers" (the backend, the default) or "vllm" (vLLM's
native Qwen3_5ForConditionalGeneration, the control).

Qwen3.5's text model is hybrid: its config's layer_types mixes "linear_attention" layers (a
gated delta net, Qwen3_5GatedDeltaNet, with its own convolution and recurrent state) with
"full_attention" layers. The backend gives every text layer one of vLLM's attention layers,
found through the layer's attention module dispatching through transformers' attention
interface. Readings:
1. transformers: the text config's layer_types and what module each layer holds; the HF
   processor's ids for one image; the HF model's top-5 logprobs of the last position;
2. vLLM's model config and the multimodal registry's processor: the image's placeholder range;
3. an engine (model_impl as given, float32): one greedy step with the image, its top-5
   logprobs against the HF model's;
4. where the backend's engine fails: what its first build of the model raises, and the engine
   again once vLLM's own Qwen3_5VisionConfig answers num_attention_heads (what-if).
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
from transformers import AutoProcessor, Qwen3_5ForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
impl = sys.argv[2] if len(sys.argv) > 2 else "transformers"
PROMPT = ("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What is in this image?"
          "<|im_end|>\n<|im_start|>assistant\n")
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, model_impl {impl}")


def failure(error: BaseException) -> str:
    cause = error.__cause__
    message = str(error)
    text = f"{type(error).__name__}: " + (repr(message) if len(message) <= 200 else
                                          f"{message[:100]!r} ... {message[-80:]!r}")
    frames = traceback.extract_tb((cause or error).__traceback__)
    where = f" at {frames[-1].filename.split('site-packages/')[-1]}:{frames[-1].lineno}" \
        if frames else ""
    return text + (f" caused by {type(cause).__name__}({str(cause)[:100]!r})" if cause else "") \
        + where


# 1. transformers (before any engine: loading the backend decorates transformers' classes)
processor = AutoProcessor.from_pretrained(path)
inputs = processor(text=PROMPT, images=[image], return_tensors="pt")
ids = inputs["input_ids"][0].tolist()
image_id = processor.tokenizer.convert_tokens_to_ids("<|image_pad|>")
print(f"1. HF processor: {len(ids)} ids, {ids.count(image_id)} <|image_pad|> (id {image_id})")
model = Qwen3_5ForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
layers = model.model.language_model.layers
kinds = [type(getattr(layer, "linear_attn", None) or layer.self_attn).__name__ for layer in layers]
print(f"1. text config layer_types {model.config.text_config.layer_types}; the layers' "
      f"attention modules {kinds}")
with torch.inference_mode():
    hf_logprobs = torch.log_softmax(model(**inputs).logits[0, -1].float(), -1)
hf_top = torch.topk(hf_logprobs, 5)
hf_top = [(int(t), round(float(v), 5)) for v, t in zip(hf_top.values, hf_top.indices, strict=True)]
print(f"1. HF model's top-5 at the last position: {hf_top}")
del model

# 2. vLLM's model config and the registry's processor
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

model_config = ModelConfig(model=path, model_impl=impl, max_model_len=1024)
mm_processor = MULTIMODAL_REGISTRY.create_processor(model_config)
out = mm_processor(PROMPT, mm_processor.info.parse_mm_data({"image": [image]}),
                   hf_processor_mm_kwargs={}, cache=None)
ranges = [(r.offset, r.length) for r in out["mm_placeholders"]["image"]]
print(f"2. vLLM resolves {model_config.architecture}; processor "
      f"{type(mm_processor).__name__}: {len(out['prompt_token_ids'])} ids, equal to the HF "
      f"processor's: {list(out['prompt_token_ids']) == ids}; image range (offset, length) {ranges}")

# 3. an engine
served = False
message = ""
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
    message = failure(error)
    print(f"3. engine: {message}")
    if os.environ.get("TRACEBACK"):
        traceback.print_exc()


def inner_cause() -> str:
    """What the backend's first model build raises: a cached property that raises an
    AttributeError surfaces as nn.Module's "has no attribute" for the property itself."""
    import torch
    from transformers import AutoModel
    from vllm.model_executor.models.transformers import base

    config = ModelConfig(model=path, model_impl=impl, max_model_len=1024).hf_config
    config.get_text_config()._attn_implementation = base.VLLM_ATTN_IMPL
    try:
        with torch.device("meta"):
            AutoModel.from_config(config=config, dtype=torch.float32)
    except Exception as error:  # noqa: BLE001 - what it raises is the reading
        return f"{type(config.vision_config).__module__}.{type(config.vision_config).__name__}: " \
            + failure(error)
    return "builds"


if "_pre_trained_model_classes" in message:
    # 4. the cause under reading 3, and (what-if) the engine once vLLM's own vision config
    # answers num_attention_heads as transformers' does (its attribute_map)
    print(f"4. the backend's model build (AutoModel.from_config on meta): {inner_cause()}")
    from vllm.transformers_utils.configs import qwen3_5 as vllm_qwen3_5  # noqa: E402

    vllm_qwen3_5.Qwen3_5VisionConfig.attribute_map = {"num_attention_heads": "num_heads"}
    try:
        vllm.LLM(model=path, model_impl=impl, dtype="float32", max_model_len=1024,
                 enforce_eager=True, kv_cache_memory_bytes=1 << 26,
                 limit_mm_per_prompt={"image": 1})
        print("4. what-if engine: started")
    except Exception as error:  # noqa: BLE001 - what it raises is the reading
        print(f"4. what-if engine: {failure(error)}")
sys.exit(0 if served else 1)

# Measured 2026-12-04, vLLM 0.31.0 (.venv), CPU, float32, on this project's tiny Qwen3.5
# checkpoint (fixtures/recipes/qwen3_5.py) built for each transformers version; model_impl
# transformers exits 1 on 5.12.1, 5.14.1, 5.15.1, 5.17.0, 5.20.2 and 5.25.0:
#   1. HF processor: 32 ids, 2 <|image_pad|> (id 12)
#   1. text config layer_types ['linear_attention', 'full_attention']; the layers' attention
#      modules ['Qwen3_5GatedDeltaNet', 'Qwen3_5Attention']
#   1. HF model's top-5 at the last position: [(224, -4.62202), (151, -5.32461), (52, -5.38562),
#      (243, -5.43205), (54, -5.44582)]
#   2. vLLM resolves TransformersMultiModalForCausalLM; processor OffsetsMultiModalProcessor
#      (5.12.1, 5.14.1: LegacyMultiModalProcessor): 32 ids, equal to the HF processor's: True;
#      image range (offset, length) [(6, 2)]
#   3. engine, 5.12.1, 5.14.1, 5.15.1: ValueError: 'Layer 0 (linear_attention) does not dispatch
#      through the Transformers attention interface and vLLM has no other way to handle it.' at
#      vllm/model_executor/models/transformers/base.py:608
#   3. engine, 5.17.0, 5.20.2, 5.25.0: AttributeError: "'TransformersMultiModalForCausalLM'
#      object has no attribute '_pre_trained_model_classes'" at torch/nn/modules/module.py:1967
#   4. (those three) the backend's model build: vllm.transformers_utils.configs.qwen3_5.
#      Qwen3_5VisionConfig: AttributeError: "'Qwen3_5VisionConfig' object has no attribute
#      'num_attention_heads'" at transformers/integrations/heterogeneity/configuration_utils.py
#      (transformers' axial vision RoPE reads it; transformers' own Qwen3_5VisionConfig maps it
#      to num_heads, vLLM's does not)
#   4. what-if engine: ValueError: 'Layer 0 (linear_attention) does not dispatch through the
#      Transformers attention interface and vLLM has no other way to handle it.'
# The control, model_impl vllm (vLLM's native model), transformers 5.17.0, exit 1 on this CPU:
#   2. vLLM resolves Qwen3_5ForConditionalGeneration; processor Qwen3VLMultiModalProcessor: 32
#      ids, equal to the HF processor's: True; image range (offset, length) [(6, 2)]
#   3. engine: NotImplementedError: '"causal_conv1d_fwd_kernel_impl" not implemented for
#      'Float'' at torch/_ops.py:1279 (native's gated delta-net kernels have no float32 CPU
#      path; not measured on a GPU)
