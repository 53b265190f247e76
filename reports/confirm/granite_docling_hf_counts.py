"""GraniteDoclingProcessor's own token count against the positions its mm_token_type_ids mark
(transformers only; the HF side of granite-docling-hf-counts-whole-image-text).

    python granite_docling_hf_counts.py CHECKPOINT

For images of several sizes, alone and two in one prompt (random pixels, the processor's
defaults): the image's text the processor writes (how many ids in all, how many of them
<image>), the positions its mm_token_type_ids mark (ProcessorMixin's, from image_token_ids),
and what `_get_num_multimodal_tokens` counts per image (num_image_tokens). Exit 1 where the
counts add up to neither the marked positions nor the <image> ids (reproduces).
"""

import sys

import numpy as np
import transformers
from PIL import Image
from transformers import AutoProcessor

path = sys.argv[1]
processor = AutoProcessor.from_pretrained(path)
tokenizer = processor.tokenizer
image_id = tokenizer.convert_tokens_to_ids("<image>")
ROLE = "<|start_of_role|>{}<|end_of_role|>"
PROMPT = ROLE.format("user") + "{}Convert these pages to docling.<|end_of_text|>\n" + \
    ROLE.format("assistant")
plain = len(tokenizer(PROMPT.format(""), add_special_tokens=False)["input_ids"])
print(f"transformers {transformers.__version__}; {type(processor).__name__}, image_token_ids "
      f"{getattr(processor, 'image_token_ids', None)} (<image> is {image_id})")
rng = np.random.RandomState(0)
reproduced = False
for sizes in ([(16, 16)], [(40, 56)], [(40, 120)], [(64, 64)], [(100, 30)], [(128, 200)],
              [(40, 56), (40, 120)]):
    images = [Image.fromarray(rng.randint(0, 256, (h, w, 3), dtype=np.uint8))
              for h, w in sizes]
    out = processor(text=PROMPT.format("<image>" * len(images)), images=images,
                    return_mm_token_type_ids=True)
    ids, types = out["input_ids"][0], out["mm_token_type_ids"][0]
    marked = sum(1 for t in types if t)
    counts = list(processor._get_num_multimodal_tokens(
        image_sizes=[list(size) for size in sizes])["num_image_tokens"])
    print(f"{sizes}: the images' text {len(ids) - plain} ids, {ids.count(image_id)} of them "
          f"<image>; mm_token_type_ids marks {marked} positions; _get_num_multimodal_tokens "
          f"counts {counts} (sum {sum(counts)})")
    reproduced |= sum(counts) not in (marked, ids.count(image_id))
sys.exit(1 if reproduced else 0)
