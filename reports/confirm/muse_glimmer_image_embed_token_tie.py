"""Does vLLM's Transformers backend embed a Muse Glimmer image where native vLLM and transformers
do when the image is one merged token? (vLLM and transformers only.)

    python muse_glimmer_image_embed_token_tie.py CHECKPOINT

CHECKPOINT: meta-models/Muse-Glimmer-30B, or this project's tiny one (fixtures/recipes/
muse_glimmer.py).

The backend's Offsets path (transformers >= 5.15) takes the most frequent id of an item's
replacement as its embedding token (`_get_embed_token_id`: torch.mode, the smallest id on a
tie). MuseGlimmerProcessor writes an image as <|image_start|>, one <|patch|> per merged 28x28
patch, <|image_end|>: an image small enough for one <|patch|> (at most 55 px a side) gives three
distinct ids, which tie. One SMALL (16x16, one token) and one LARGE (64x64, 3x3 tokens) image,
through the HF processor (where its <|patch|> sits), native vLLM's processor and the backend's
(the ids their embedding positions hold).
Exit 1: the small image's embedding positions differ (reproduces; the large one's agreeing shows
the cause is the tie).
"""

import sys

import numpy as np
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY

PROMPT = ("<|begin_of_text|><|start|>user<|message|><|patch|>What is in this image?<|eot|>"
          "<|start|>assistant<|message|>")
path = sys.argv[1]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
hf = AutoProcessor.from_pretrained(path)
tokenizer = hf.tokenizer
names = {i: tokenizer.convert_ids_to_tokens(i) for i in
         tokenizer.convert_tokens_to_ids(["<|image_start|>", "<|patch|>", "<|image_end|>"])}
print(f"ids: {names}")
processors = {impl: MULTIMODAL_REGISTRY.create_processor(ModelConfig(
    model=path, model_impl=impl, limit_mm_per_prompt={"image": 1}))
    for impl in ("vllm", "transformers")}


def image(size):
    return Image.fromarray(np.random.RandomState(0).randint(0, 256, (*size, 3), dtype=np.uint8))


def embeds(impl, size):
    processor = processors[impl]
    out = processor(PROMPT, processor.info.parse_mm_data({"image": [image(size)]}))
    ids = list(out["prompt_token_ids"])
    (r,) = out["mm_placeholders"]["image"]
    positions = [r.offset + i for i in (range(r.length) if r.is_embed is None
                                        else r.is_embed.nonzero().flatten().tolist())]
    print(f"  {impl:<12} image {size}: range ({r.offset}, {r.length}) ids "
          f"{ids[r.offset:r.offset + r.length]}, embedding positions {positions} holding ids "
          f"{sorted({ids[p] for p in positions})}")
    return positions


same = {}
for size in ((16, 16), (64, 64)):
    ids = hf(text=PROMPT, images=[image(size)])["input_ids"][0]
    patch = tokenizer.convert_tokens_to_ids("<|patch|>")
    at = [i for i, t in enumerate(ids) if t == patch]
    print(f"image {size}: HF processor's <|patch|> at {at}")
    same[size] = embeds("vllm", size) == embeds("transformers", size)
print("small image agrees:", same[(16, 16)], "| large image agrees:", same[(64, 64)])
sys.exit(1 if not same[(16, 16)] else 0)
