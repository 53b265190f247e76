"""How vLLM's Transformers backend handles PerceptionLM's images (vLLM and transformers only)

    python perception_lm_backend.py CHECKPOINT

CHECKPOINT: facebook/Perception-LM-1B, or this project's tiny one (wip/perception_lm/recipe.py,
the unfinished fixture recipe; copy it to fixtures/recipes/perception_lm.py), built with
    .venv/bin/python -c "from pathlib import Path; from fixtures.build import write_checkpoint;
    from fixtures.recipes.perception_lm import RECIPE, make;
    write_checkpoint(RECIPE, make('tiny'), Path('/tmp/perception_lm'))"
(under `conformance exec --transformers V --` for another transformers version; the vision tower
is timm's, through transformers' TimmWrapper, so timm must be importable).

PerceptionLMForConditionalGeneration has no native model in vLLM 0.31.0 (its registry does not
know it), so vLLM falls back to the Transformers backend. PerceptionLMImageProcessor returns
`pixel_values` as one row per image, each holding that image's tiles (a thumbnail plus up to
max_num_tiles crops): (images, tiles, 3, H, W), while PerceptionLMProcessor's
`_get_num_multimodal_tokens` reports `num_image_patches` = tiles per image. The backend slices
the image fields by `num_image_patches` (`_get_num_image_patches`) and checks that the rows add
up. Readings:
1. transformers: pixel_values' shape and num_image_patches for one image; whether two images
   of different tile counts can be processed together at all (the HF model takes one 5-D
   tensor);
2. the backend's processor (vLLM's multimodal registry) on a prompt with one image, and on
   one with two images of the same tile count (pixel_values (2, tiles, ...), whose rows the
   backend cannot split into the per-image `num_image_patches`);
3. an engine (model_impl="transformers", float32, CPU or GPU): a prompt with one image, and
   a prompt with one video (4 frames).
Exit 1 when the backend cannot process the two images (reproduces).
"""

import os
import sys

import numpy as np
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
HEAD = "<|start_header_id|>user<|end_header_id|>\n\n"
TAIL = "What is this?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
rng = np.random.RandomState(0)
image = Image.fromarray(rng.randint(0, 256, (40, 90, 3), dtype=np.uint8))
square = Image.fromarray(rng.randint(0, 256, (60, 60, 3), dtype=np.uint8))
video = rng.randint(0, 256, (4, 50, 70, 3), dtype=np.uint8)
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
reproduced = False

# 1. transformers
processor = AutoProcessor.from_pretrained(path)
one = processor(text=HEAD + "<|image|>" + TAIL, images=[image], return_tensors="pt")
counts = processor._get_num_multimodal_tokens(image_sizes=[(image.height, image.width)])
print(f"1. one 90x40 image: pixel_values {tuple(one['pixel_values'].shape)}, "
      f"num_image_patches {list(counts['num_image_patches'])}, "
      f"num_image_tokens {list(counts['num_image_tokens'])}")
try:
    two = processor(text=HEAD + "<|image|><|image|>" + TAIL, images=[image, square],
                    return_tensors="pt")
    together = f"pixel_values {tuple(two['pixel_values'].shape)}"
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    together = f"{type(error).__name__}: {str(error)[:150]!r}"
print(f"   90x40 and 60x60 together: {together}")

# 2. the backend's processor
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

model_config = ModelConfig(model=path, model_impl="transformers", max_model_len=1024)
print(f"2. vLLM resolves {model_config.architecture}")
mm_processor = MULTIMODAL_REGISTRY.create_processor(model_config)
try:
    out = mm_processor(HEAD + "<|image|>" + TAIL,
                       mm_processor.info.parse_mm_data({"image": [image]}),
                       hf_processor_mm_kwargs={})
    processed = f"processed: {len(out['prompt_token_ids'])} prompt ids"
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    processed = f"{type(error).__name__}: {str(error)[:240]!r}"
print(f"   one image: {processed}")
wide = Image.fromarray(rng.randint(0, 256, (45, 100, 3), dtype=np.uint8))
try:
    out = mm_processor(HEAD + "<|image|><|image|>" + TAIL,
                       mm_processor.info.parse_mm_data({"image": [image, wide]}),
                       hf_processor_mm_kwargs={})
    processed = f"processed: {len(out['prompt_token_ids'])} prompt ids"
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    processed = f"{type(error).__name__}: {str(error)[:240]!r}"
    reproduced = True
print(f"   two images of 4 tiles each (90x40, 100x45): {processed}")

# 3. an engine
llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
               enforce_eager=True, kv_cache_memory_bytes=1 << 26,
               limit_mm_per_prompt={"image": 2, "video": 1})
for name, prompt, data in (
    ("one image", HEAD + "<|image|>" + TAIL, {"image": [image]}),
    ("one video", HEAD + "<|video|>" + TAIL, {"video": [video]}),
):
    try:
        out = llm.generate({"prompt": prompt, "multi_modal_data": data},
                           vllm.SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)[0]
        served = f"served: {len(out.prompt_token_ids)} prompt ids"
    except Exception as error:  # noqa: BLE001 - what it raises is the reading
        served = f"{type(error).__name__}: {str(error)[:240]!r}"
    print(f"3. engine, {name}: {served}")
sys.exit(1 if reproduced else 0)

# Measured 2026-12-04, vLLM 0.31.0 (.venv), CPU, transformers 5.17.0, on the tiny checkpoint
# (readings 1, 2 and the engine; the two-image reading of 2 from its processor-level part):
#   1. one 90x40 image: pixel_values (1, 4, 3, 56, 56), num_image_patches [4], num_image_tokens
#      [16]; 90x40 and 60x60 together: ValueError: "Unable to convert output 'pixel_values'
#      (type: list) to tensor: stack expects each tensor to be equal size, but got
#      [4, 3, 56, 56] at entry 0 and [5, ..."
#   2. vLLM resolves TransformersMultiModalForCausalLM; one image: processed: 43 prompt ids;
#      two images of 4 tiles each: ValueError: 'PerceptionLMProcessor returned 2 row(s) of image
#      data for 2 image(s), which cannot be split into the [4, 4] row(s) per image ...'
#   3. engine, one image: served: 43 prompt ids; one video: VLLMValidationError: 'At most 0
#      video(s) may be provided in one prompt.' (the backend takes no video for it)
