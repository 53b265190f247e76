"""How does vLLM's Transformers backend split VideoLLaMA3's image_merge_sizes between images?
(vLLM and transformers only.)

    python video_llama_3_merge_sizes.py CHECKPOINT

VideoLlama3Processor returns, beside pixel_values (one row per 14 px patch of every image) and
image_grid_thw (one row per image), `image_merge_sizes`: one value per image (1 for images).
The backend's _get_mm_fields_config slices every tensor field it did not write itself by the
items' patch counts (flat_from_sizes), so a field of one entry per image is cut as if it held
one row per patch. Readings, for a prompt with two 64x96 images (6 patches each):
1. the HF processor's image_grid_thw and image_merge_sizes;
2. the backend's fields per item (mm_kwargs), image_merge_sizes of each;
3. the same for each image processed alone.
Exit 1 while item 0 of the pair holds both images' merge sizes (reproduces).
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import transformers  # noqa: E402
import vllm  # noqa: E402
from PIL import Image  # noqa: E402
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

path = sys.argv[1]
PROMPT = "<|im_start|>user\n<|image_pad|><|image_pad|>What is in these images?<|im_end|>\n"
images = [Image.fromarray(np.random.RandomState(s).randint(0, 256, (64, 96, 3), dtype=np.uint8))
          for s in (0, 1)]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

hf = transformers.AutoProcessor.from_pretrained(path)(text=[PROMPT], images=images,
                                                       return_tensors="pt")
print("1. HF image_grid_thw", hf["image_grid_thw"].tolist(),
      "image_merge_sizes", hf["image_merge_sizes"].tolist())

config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                     limit_mm_per_prompt={"image": 2})
mm = MULTIMODAL_REGISTRY.create_processor(config)


def merge_sizes(prompt, items):
    out = mm(prompt, mm.info.parse_mm_data({"image": items}))
    found = []
    for item in out["mm_kwargs"]["image"]:
        data = item.get_data()
        found.append((data["image_grid_thw"].tolist(), data["image_merge_sizes"].tolist()))
    return found


pair = merge_sizes(PROMPT, images)
print("2. backend, both images: per item (image_grid_thw, image_merge_sizes):", pair)
alone = [merge_sizes(PROMPT.replace("<|image_pad|>", "", 1), [image])[0] for image in images]
print("3. backend, each image alone:", alone)
reproduces = pair != alone
print("REPRODUCES: a batched item's image_merge_sizes is not its own" if reproduces
      else "DOES NOT REPRODUCE")
sys.exit(1 if reproduces else 0)
