"""Can vLLM's Transformers backend serve Fuyu's images? (vLLM and transformers only)

    python fuyu_backend.py CHECKPOINT

CHECKPOINT: adept/fuyu-8b, or this project's tiny one (fixtures/recipes/fuyu.py, not a
registered fixture since the backend cannot serve it), built with
    .venv/bin/python -c "from pathlib import Path; from fixtures.build import write_checkpoint;
    from fixtures.recipes.fuyu import RECIPE, make;
    write_checkpoint(RECIPE, make('tiny'), Path('/tmp/fuyu'))"
(under `conformance exec --transformers V --` for another transformers version).

FuyuForCausalLM has no native model in vLLM 0.31.0 (its registry lists it among the previously
supported architectures, native until 0.25.0): vLLM falls back to the Transformers backend, and
FuyuConfig nests a text config, so it picks the multimodal class. FuyuProcessor writes the image
itself: it puts '|SPEAKER|' (its image token) before each prompt and expands it into rows of
'|SPEAKER|' ended by '|NEWLINE|', then '<s>', and appends '<0x04>'. A prompt written as
transformers documents it holds no image token; the backend's prompt updates look for one. One
random 25x37 image (float32), two prompt forms: P0 without an image token, P1 with '|SPEAKER|'
before the text. Readings:
1. the HF processor on each: its ids or what it raises; the HF model's logprobs on P0,
2. the backend's processor (vLLM's multimodal registry) on each: prompt ids and the image's
   placeholder range, or what it raises;
   and what the HF model's get_image_features returns (the backend's encoder step takes its
   pooler_output);
3. an engine (model_impl="transformers"): one greedy step on each form, and where one is
   served, its top-5 logprobs against the HF model's on the HF processor's inputs for P0.
Exit 1 when no prompt form is served (reproduces).
"""

import os
import sys
import traceback

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor, FuyuForCausalLM

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
TEXT = "Generate a coco-style caption.\n"
PROMPTS = {"P0": TEXT, "P1": "|SPEAKER|" + TEXT}
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (25, 37, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


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


# 1. the HF processor
processor = AutoProcessor.from_pretrained(path)
speaker = processor.tokenizer.convert_tokens_to_ids("|SPEAKER|")
hf_inputs = {}
for name, prompt in PROMPTS.items():
    try:
        out = processor(text=prompt, images=[image], return_tensors="pt")
        ids = out["input_ids"][0].tolist()
        hf_inputs[name] = out
        print(f"1. HF processor, {name}: {len(ids)} ids, {ids.count(speaker)} |SPEAKER|: {ids}")
    except Exception as error:  # noqa: BLE001 - what it raises is the reading
        print(f"1. HF processor, {name}: {failure(error)}")

# the HF model's greedy step on P0 (before any engine: loading the backend decorates
# transformers' model classes for the whole process)
hf_logprobs = None
if "P0" in hf_inputs:
    model = FuyuForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    keep = {k: v for k, v in hf_inputs["P0"].items()
            if k in ("input_ids", "attention_mask", "image_patches", "image_patches_indices")}
    with torch.inference_mode():
        hf_logprobs = torch.log_softmax(model(**keep).logits[0, -1].float(), -1)
        # what the backend's encoder step reads: get_image_features' pooler_output
        patches = keep["image_patches"]
        patches = patches[0] if isinstance(patches, list) else patches
        features = model.model.get_image_features(patches.reshape(-1, patches.shape[-1])[None])
    rows = getattr(features, "last_hidden_state", None)
    print(f"1. HF model's get_image_features: {type(features).__name__}, pooler_output "
          f"{getattr(features, 'pooler_output', None)}, last_hidden_state "
          f"{None if rows is None else tuple(rows.shape)}")
    del model

# 2. the backend's processor
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

config = ModelConfig(model=path, model_impl="transformers", max_model_len=1024,
                     limit_mm_per_prompt={"image": 1})
backend_processor = MULTIMODAL_REGISTRY.create_processor(config)
print(f"2. vLLM resolves {config.architecture}; processor {type(backend_processor).__name__}")
for name, prompt in PROMPTS.items():
    try:
        out = backend_processor(prompt, backend_processor.info.parse_mm_data({"image": [image]}),
                                hf_processor_mm_kwargs={}, cache=None)
        ranges = [(r.offset, r.length) for r in out["mm_placeholders"]["image"]]
        print(f"2. backend processor, {name}: {len(out['prompt_token_ids'])} ids "
              f"{out['prompt_token_ids']}; image range (offset, length) {ranges}")
    except Exception as error:  # noqa: BLE001 - what it raises is the reading
        print(f"2. backend processor, {name}: {failure(error)}")

# 3. the engine
llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
               limit_mm_per_prompt={"image": 1}, enforce_eager=True,
               kv_cache_memory_bytes=1 << 26)
served = False
for name, prompt in PROMPTS.items():
    try:
        result = llm.generate({"prompt": prompt, "multi_modal_data": {"image": [image]}},
                              vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5),
                              use_tqdm=False)[0]
    except Exception as error:  # noqa: BLE001 - what it raises is the reading
        print(f"3. engine, {name}: {failure(error)}")
        continue
    served = True
    backend = {int(t): float(v.logprob) for t, v in result.outputs[0].logprobs[0].items()}
    line = f"3. engine, {name}: served, {len(result.prompt_token_ids)} prompt ids"
    if hf_logprobs is not None:
        hf_ids = hf_inputs["P0"]["input_ids"][0].tolist()
        gap = max(abs(float(hf_logprobs[t]) - v) for t, v in backend.items())
        line += (f"; equal to the HF processor's P0 ids: {list(result.prompt_token_ids) == hf_ids}"
                 f"; top-5 logprobs vs the HF model's on P0: largest difference {gap:.3e}")
    print(line)
sys.exit(0 if served else 1)

# Measured 2026-12-04, vLLM 0.31.0 (.venv), CPU, float32, on this project's tiny Fuyu
# checkpoint (fixtures/recipes/fuyu.py) built for each transformers version (exit 1 on each;
# |SPEAKER| is id 354, |NEWLINE| 355, <s> 1, "▁" 353; the image is 3 rows of 4 patches):
# every version:
#   1. HF processor, P0: 37 ids, 12 |SPEAKER|: [354, 354, 354, 354, 355, ... 355, 1, 353, 297, ...]
#   1. HF model's get_image_features: BaseModelOutputWithPooling, pooler_output None,
#      last_hidden_state (1, 12, 64)
#   2. vLLM resolves TransformersMultiModalForCausalLM
# 5.12.1 and 5.14.1 (LegacyMultiModalProcessor):
#   1. HF processor, P1: 38 ids, 13 |SPEAKER| (the prompt's own |SPEAKER| kept as text)
#   2. backend processor, P0: 39 ids [354, ... 355, 1, 1, 353, 353, 297, ...] (the decoded
#      prompt's BOS and "▁" once more); image range (offset, length) [(0, 15)]
#   2./3. P1: ValueError: 'The expanded prompt holds 16 image token(s) but FuyuProcessor
#      accounts for 15 across 1 image item(s).' at .../transformers/multimodal.py:548
#   3. engine, P0: TypeError: "'NoneType' object is not iterable" at
#      vllm/model_executor/models/transformers/multimodal.py:1168 (return list(vision_embeddings))
# 5.15.1 (OffsetsMultiModalProcessor): HF processor as on 5.14.1; backend processor and engine,
#   P0 and P1: ValueError: 'FuyuProcessor returned no text replacement offsets, so the
#   Transformer...' at .../transformers/multimodal.py:852
# 5.17.0 and 5.20.2 (OffsetsMultiModalProcessor):
#   1. HF processor, P1: StopIteration at transformers/processing_utils.py:905 (5.20.2: :906)
#      (replacement_text = next(replacements_iters[mm_type]))
#   2./3. backend processor and engine, P0 and P1: ValueError: "Failed to apply FuyuProcessor on
#      data={'text': '|SPEAKER|', 'images': " ... caused by StopIteration('')
# 5.25.0: as 5.17.0, the HF processor's P1 and the backend's P0 and P1 caused by ValueError('The
#   total number of |SPEAKER| tokens in the prompts should be the same as the number of images
#   passed. Found total 2 |SPEAKER| tokens and 1 images.')
# vLLM 0.33.0's wheel over .venv (no CPU build: readings 1 and 2 only), 5.17.0 and 5.20.2: as
# 0.31.0 (its processor class is MultiModalProcessor).
