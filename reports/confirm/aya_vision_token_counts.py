"""Does AyaVisionProcessor's token-count helper count every image token its outputs mark?
(transformers only.) vLLM's backend sizes an image's budget and splits encoder output with
`_get_num_multimodal_tokens`, and the HF expansion cuts marked positions into items by it.

    python aya_vision_token_counts.py CHECKPOINT    # an Aya Vision checkpoint folder

Exit 0: for each image size, the helper's count equals the positions `mm_token_type_ids`
marks; exit 1: it does not (printed). On the aya_vision fixture: 5.24.0 counts 27 for a
400x400 image and marks 27; 5.25.0 counts 20 (the <|IMG_PATCH|> tokens alone) and marks 27
(with the tile markers and the start and end tokens). Not a finding: 5.25.0 counts the tokens
that receive features on purpose (InternVL, Idefics3 and Pixtral the same), which vLLM's budget
wants; the HF oracle cuts the marked positions by either meaning (subjects/hf_expansion.py).
"""

import sys

import numpy as np
import transformers
from PIL import Image
from transformers import AutoProcessor


def main(path: str) -> int:
    processor = AutoProcessor.from_pretrained(path)
    differs = False
    for height, width in [(400, 400), (51, 400), (56, 56)]:
        image = Image.fromarray(np.zeros((height, width, 3), dtype=np.uint8))
        out = processor(text="Describe <image>", images=[image], return_mm_token_type_ids=True)
        marked = int(np.asarray(out["mm_token_type_ids"][0]).sum())
        counted = processor._get_num_multimodal_tokens(image_sizes=[[height, width]])
        counts = list(counted["num_image_tokens"])
        print(f"transformers {transformers.__version__}, image {height}x{width}: "
              f"mm_token_type_ids marks {marked}, _get_num_multimodal_tokens counts {counts}")
        differs |= counts != [marked]
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
