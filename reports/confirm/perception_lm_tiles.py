"""Can vLLM's Transformers backend split PerceptionLM's image rows between two images?
(vLLM and transformers only.)

    python perception_lm_tiles.py CHECKPOINT

CHECKPOINT: facebook/Perception-LM-1B, or this project's tiny fixture (fixtures/recipes/
perception_lm.py: 56 px tiles, up to 2 tiles plus the thumbnail), e.g. the harness's built
folder ~/.cache/vllm-mm-conformance/fixtures/perception_lm-tiny-tf<version>-<digest>. The vision
tower is timm's (through transformers' TimmWrapper): timm must be importable.

PerceptionLMImageProcessor nests each image's thumbnail and tiles in one row of pixel_values:
(images, tiles, 3, H, W); PerceptionLMProcessor._get_num_multimodal_tokens reports
num_image_patches = tiles per image, and the HF model flattens the first two axes itself. The
backend slices the image fields by num_image_patches along the axis it guesses
(_get_slice_dim: axis 1 only when axis 0 does not match the total and axis 1 does), so one image
works (axis 1 holds its tiles) but two images of T tiles each, 2 rows on axis 0 and T on axis 1,
never match the total 2T. Readings, two images of 60x40 and 32x64 (3 rows each on the fixture):
1. transformers: pixel_values and num_image_patches; the HF model's image features for both;
   and whether images of different tile counts can be processed together at all (the HF
   processor's own limit: it stacks the per-image rows);
2. the backend's processor (vLLM's multimodal registry): each image alone, then both (below
   transformers 5.15, the Legacy path: no row check, each image's pixel_values as cut); the
   pair of different tile counts; two placeholders for one image;
3. the backend's image budget (get_max_image_tokens: a 10000x10000 probe) beside the HF
   processor's counts for it and for 400x51 and 51x400 images;
4. an engine (model_impl="transformers", float32): both images, then one.
Exit 1 while the backend cannot split the two images' rows (reproduces).
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import vllm  # noqa: E402
from PIL import Image  # noqa: E402
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

path = sys.argv[1]
HEAD = "<|start_header_id|>user<|end_header_id|>\n\n"
TAIL = "What is in these images?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
ONE, TWO = HEAD + "<|image|>" + TAIL, HEAD + "<|image|><|image|>" + TAIL


def image(height: int, width: int, seed: int) -> Image.Image:
    pixels = np.random.RandomState(seed).randint(0, 256, (height, width, 3), dtype=np.uint8)
    return Image.fromarray(pixels)


def reading(call) -> str:
    try:
        return call()
    except Exception as error:  # noqa: BLE001 - what it raises is the reading
        cause = error.__cause__ or error.__context__
        why = f" (caused by {type(cause).__name__}: {str(cause)[:120]!r})" if cause else ""
        return f"{type(error).__name__}: {str(error)[:260]!r}{why}"


images = [image(40, 60, 0), image(64, 32, 1)]
sizes = [(im.height, im.width) for im in images]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

# 1. transformers
processor = transformers.AutoProcessor.from_pretrained(path)
hf = processor(text=TWO, images=images, return_tensors="pt")
counts = processor._get_num_multimodal_tokens(image_sizes=sizes)
print(f"1. HF processor, 60x40 + 32x64: pixel_values {tuple(hf['pixel_values'].shape)}, "
      f"num_image_patches {list(counts['num_image_patches'])}, "
      f"num_image_tokens {list(counts['num_image_tokens'])}")
model = transformers.AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32)
with torch.no_grad():
    # the HF model flattens (images, tiles) itself; its forward takes the 5-D pixel_values
    logits = model(**hf).logits
placed = int((hf["input_ids"] == model.config.image_token_id).sum())
print(f"   HF model on both: logits {tuple(logits.shape)} ({placed} image tokens placed)")
small = image(20, 20, 2)
print("   images of different tile counts (20x20, 60x40) together: " + reading(
    lambda: str(tuple(processor(text=TWO, images=[small, images[0]],
                                return_tensors="pt")["pixel_values"].shape))))

# 2. the backend's processor
config = ModelConfig(model=path, model_impl="transformers", max_model_len=1024,
                     limit_mm_per_prompt={"image": 2})
print(f"2. vLLM resolves {config.architecture}")
mm = MULTIMODAL_REGISTRY.create_processor(config)


def fields(prompt: str, items: list) -> str:
    out = mm(prompt, mm.info.parse_mm_data({"image": items}), hf_processor_mm_kwargs={})
    shapes = [tuple(item.get_data()["pixel_values"].shape) for item in out["mm_kwargs"]["image"]]
    return f"processed, pixel_values per item {shapes}"


for size, item in zip(("60x40", "32x64"), images, strict=True):
    print(f"   {size} alone: " + reading(lambda item=item: fields(ONE, [item])))
both = reading(lambda: fields(TWO, images))
print(f"   both: {both}")
# Legacy path (< 5.15): no row check, so each item's rows are what the guess cuts
reproduces = "cannot be split" in both or "[(2, 3, 3, 56, 56), (0," in both
print("   20x20 and 60x40 (different tile counts): "
      + reading(lambda: fields(TWO, [small, images[0]])))
print("   two placeholders, one image: " + reading(lambda: fields(TWO, images[:1])))

# 3. the backend's budget per image
budget = mm.info.get_max_image_tokens()
probes = [(10_000, 10_000), (51, 400), (400, 51)]
tokens = processor._get_num_multimodal_tokens(image_sizes=probes)["num_image_tokens"]
print(f"3. backend budget per image {budget}; HF num_image_tokens for (height, width) {probes}: "
      f"{list(tokens)}")

# 4. an engine
llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
               enforce_eager=True, kv_cache_memory_bytes=1 << 26,
               limit_mm_per_prompt={"image": 2})
greedy = vllm.SamplingParams(temperature=0.0, max_tokens=1)
# both first: once an image is in the processor cache, the backend processes only the others
for name, prompt, items in (("both images", TWO, images), ("one image", ONE, images[:1])):
    print(f"4. engine, {name}: " + reading(lambda prompt=prompt, items=items: (
        "served, {} prompt ids".format(len(llm.generate(
            {"prompt": prompt, "multi_modal_data": {"image": items}}, greedy,
            use_tqdm=False)[0].prompt_token_ids)))))
print("REPRODUCES: the backend cannot split two images' nested tile rows" if reproduces
      else "DOES NOT REPRODUCE")
sys.exit(1 if reproduces else 0)
