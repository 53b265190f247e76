"""Can vLLM's Transformers backend serve Granite 4 Vision's images? (vLLM and transformers only)

    python granite4_vision_unservable.py CHECKPOINT [transformers|vllm]

CHECKPOINT: ibm-granite/granite-vision-4.1-4b, or this project's tiny one
(fixtures/recipes/granite4_vision.py, not a registered fixture since the backend cannot serve
it), built with
    .venv/bin/python -c "from pathlib import Path; from fixtures.build import write_checkpoint;
    from fixtures.recipes.granite4_vision import RECIPE, make;
    write_checkpoint(RECIPE, make('tiny'), Path('/tmp/granite4_vision'))"
(under `conformance exec --transformers V --` for another transformers version). The second
argument is vLLM's model_impl: "transformers" (the backend, the default) or "vllm" (vLLM 0.31.0's
native Granite4VisionForConditionalGeneration, the control: the same checkpoint served).

Granite4VisionModel.get_image_features returns a Granite4VisionImageFeaturesOutput holding
`deepstack_features` (one (text layer, features) pair per projected level) and no
pooler_output; Granite4VisionModel.forward zeroes the image tokens' input embeddings and adds
each level into the image positions before its decoder layer. The backend's encoder step takes
get_image_features' pooler_output and scatters it into the input embeddings only. Readings:
1. transformers: the HF processor's ids for one image; what get_image_features returns; the HF
   model's top-5 logprobs of the last position;
2. vLLM's model config and the multimodal registry's processor: the image's placeholder range;
3. an engine (model_impl as given, float32, CPU or GPU): one greedy step with the image, its
   top-5 logprobs against the HF model's.
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
from transformers import AutoProcessor, Granite4VisionForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
impl = sys.argv[2] if len(sys.argv) > 2 else "transformers"
PROMPT = "<|start_of_role|>user<|end_of_role|><image>\nWhat is in this image?<|end_of_text|>\n" \
         "<|start_of_role|>assistant<|end_of_role|>"
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, model_impl {impl}")


def failure(error: BaseException) -> str:
    cause = error.__cause__
    message = str(error)
    text = f"{type(error).__name__}: " + (repr(message) if len(message) <= 160 else
                                          f"{message[:70]!r} ... {message[-80:]!r}")
    frames = traceback.extract_tb((cause or error).__traceback__)
    where = f" at {frames[-1].filename.split('site-packages/')[-1]}:{frames[-1].lineno} " \
        f"({frames[-1].line})" if frames else ""
    return text + (f" caused by {type(cause).__name__}({str(cause)[:100]!r})" if cause else "") \
        + where


# 1. transformers (before any engine: loading the backend decorates transformers' classes)
processor = AutoProcessor.from_pretrained(path)
inputs = processor(text=PROMPT, images=[image], return_tensors="pt")
ids = inputs["input_ids"][0].tolist()
image_id = processor.image_token_id
print(f"1. HF processor: {len(ids)} ids, {ids.count(image_id)} <image> (id {image_id})")
model = Granite4VisionForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
with torch.inference_mode():
    hf_logprobs = torch.log_softmax(model(**inputs).logits[0, -1].float(), -1)
    features = model.model.get_image_features(
        inputs["pixel_values"], inputs["image_sizes"],
        vision_feature_select_strategy=model.config.vision_feature_select_strategy)
levels = [(layer, tuple(torch.cat(list(packed)).shape)) for layer, packed in
          features.deepstack_features]
hf_top = torch.topk(hf_logprobs, 5)
hf_top = [(int(t), round(float(v), 5)) for v, t in zip(hf_top.values, hf_top.indices, strict=True)]
print(f"1. HF model's get_image_features: {type(features).__name__}, pooler_output "
      f"{features.pooler_output}; deepstack_features (text layer, shape): {levels}")
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
sys.exit(0 if served else 1)

# Measured 2026-12-04, vLLM 0.31.0 (.venv), CPU, float32, on this project's tiny Granite 4
# Vision checkpoint (fixtures/recipes/granite4_vision.py) built for each transformers version;
# model_impl transformers exits 1 on 5.12.1, 5.14.1, 5.15.1, 5.17.0, 5.20.2 and 5.25.0:
#   1. HF processor: 101 ids, 14 <image> (id 321)
#   1. HF model's get_image_features: Granite4VisionImageFeaturesOutput, pooler_output None;
#      deepstack_features (text layer, shape): [(0, (14, 64)), (1, (14, 64)), (2, (14, 64)),
#      (3, (14, 64)), (4, (14, 64))]
#   2. vLLM resolves TransformersMultiModalForCausalLM; processor OffsetsMultiModalProcessor
#      (5.12.1, 5.14.1: LegacyMultiModalProcessor): 101 ids, equal to the HF processor's: True;
#      image range (offset, length) [(34, 14)]
#   3. engine: ValueError: "Unrecognized configuration class <class 'dict'> for this kind of
#      AutoModel: AutoModel. ..." at transformers/models/auto/auto_factory.py:250 (5.12.1: :252,
#      5.20.2: :255). The traceback (same script, traceback.print_exc): vLLM's
#      TransformersMultiModalForCausalLM.__init__ -> _decorate_for_torch_compile ->
#      _pre_trained_model_classes -> AutoModel.from_config -> Granite4VisionModel.__init__ ->
#      Granite4VisionWindowQFormerDownsampler.__init__ (modeling_granite4_vision.py:147,
#      `self.qformer = AutoModel.from_config(config.qformer_config)`). vLLM 0.31.0 parses
#      granite4_vision with its own Granite4VisionConfig (vllm/transformers_utils/configs/
#      granite4_vision.py, in _CONFIG_REGISTRY, written before transformers had the model),
#      which builds vision_config and text_config but leaves qformer_config the raw dict of
#      config.json (ModelConfig(...).hf_config.qformer_config is a dict; transformers'
#      AutoConfig gives a Blip2QFormerConfig). Past that, the backend's encoder step would take
#      get_image_features' pooler_output (None, reading 1), and the HF model adds its image
#      features into decoder layers (deepstack), which the backend's input-embedding scatter
#      cannot express.
# The control, model_impl vllm (vLLM's native model), transformers 5.17.0, exit 0:
#   2. vLLM resolves Granite4VisionForConditionalGeneration; processor
#      Granite4VisionMultiModalProcessor: 101 ids, equal to the HF processor's: True; image
#      range (offset, length) [(34, 14)]
#   3. engine: served, 101 prompt ids; top-5 [(145, -5.66028), (182, -5.68107), (2, -5.68114),
#      (46, -5.68516), (40, -5.68710)]; largest difference from the HF model's logprobs 0.000e+00
