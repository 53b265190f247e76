"""Where does an image's placeholder lie in a Gemma3 prompt: transformers' processor against
vLLM's Transformers backend? (vLLM and transformers only.)

    python gemma3_hf_soft_token_ranges.py CHECKPOINT

CHECKPOINT: a Gemma3 checkpoint vLLM has no native model for (Gemma3ForSequenceClassification),
so the HF processor is the only reference. transformers' Gemma3Processor marks the image's
<image_soft_token> run in its token type ids; the backend (model_impl="transformers", no
engine: its multimodal processor alone) places the whole replacement '\\n\\n<start_of_image>'
+ soft tokens + '<end_of_image>\\n\\n', with is_embed on the soft tokens, as native vLLM does
for Gemma3ForConditionalGeneration. Exit 1: the ranges differ while the embedding positions
agree (reproduces). Then two adjacent images: the newlines between them, one token in the HF
processor's ids, two in the backend's.
"""

import sys

import numpy as np
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY

path = sys.argv[1]
PROMPT = ("<start_of_turn>user <start_of_image> Which sentiment does this image show?"
          "<end_of_turn>\n<start_of_turn>model\n")
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (30, 40, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

hf = AutoProcessor.from_pretrained(path)(text=PROMPT, images=[image], return_tensors="np",
                                         return_mm_token_type_ids=True)
types = hf["mm_token_type_ids"] if "mm_token_type_ids" in hf else hf["token_type_ids"]
marked = [i for i, t in enumerate(types[0].tolist()) if t]
print(f"HF processor: {len(hf['input_ids'][0])} ids; image marked at {marked}")

config = ModelConfig(model=path, model_impl="transformers", runner="pooling", dtype="float32",
                     limit_mm_per_prompt={"image": 2})
processor = MULTIMODAL_REGISTRY.create_processor(config)
out = processor(PROMPT, processor.info.parse_mm_data({"image": [image]}), hf_processor_mm_kwargs={})
(place,) = out["mm_placeholders"]["image"]
embeds = (list(range(place.offset, place.offset + place.length)) if place.is_embed is None
          else [place.offset + i for i, e in enumerate(place.is_embed.tolist()) if e])
ids = out["prompt_token_ids"]
print(f"backend ({config.architecture}): {len(ids)} ids; placeholder offset={place.offset} "
      f"length={place.length}, embeddings at {embeds}")
print(f"the backend's range holds {ids[place.offset:place.offset + place.length]}")

# Two adjacent images: the newlines between them (gemma3-offsets-newlines-vs-hf)
TWO = "<start_of_turn>user <start_of_image><start_of_image> Which?<end_of_turn>\n"
hf_two = AutoProcessor.from_pretrained(path)(text=TWO, images=[image, image])["input_ids"][0]
ours = processor(TWO, processor.info.parse_mm_data({"image": [image, image]}),
                 hf_processor_mm_kwargs={})
at = next(i for i, (a, b) in enumerate(zip(hf_two, ours["prompt_token_ids"], strict=False))
          if a != b)
print(f"two adjacent images: HF {len(hf_two)} ids, from {at}: {hf_two[at:at + 4]}; backend "
      f"{len(ours['prompt_token_ids'])} ids, from {at}: {ours['prompt_token_ids'][at:at + 4]}")
sys.exit(1 if (place.offset, place.length) != (marked[0], len(marked)) and embeds == marked
         else 0)

# Measured 2026-12-03, vLLM 0.31.0 (.venv), transformers 5.17.0, CPU, on this project's tiny
# gemma3_seq_cls fixture (exit 1):
#   HF processor: 52 ids; image marked at [8, 9, 10, 11]
#   backend (TransformersMultiModalForSequenceClassification): 52 ids; placeholder offset=6
#     length=8, embeddings at [8, 9, 10, 11]
#   the backend's range holds [331, 7, 329, 329, 329, 329, 8, 331]
#   two adjacent images: HF 29 ids, from 13: [333, 7, 329, 329]; backend 30 ids, from 13:
#     [331, 331, 7, 329]
