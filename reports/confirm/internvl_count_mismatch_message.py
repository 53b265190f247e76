#!/usr/bin/env python3
"""Confirms internvl-legacy-mismatch-message-without-counts with transformers
only (vLLM's backend cannot create this processor at all: internvl-processor-shadowed). A
prompt with no image placeholder and one image: transformers' (< 5.15) InternVLProcessor says
that the numbers do not match, but not what they are.

    .venv/bin/conformance exec --transformers 5.12.1 -- \
        .venv/bin/python reports/confirm/internvl_count_mismatch_message.py INTERNVL_CHECKPOINT_DIR
"""

import sys

import numpy as np
import transformers
from PIL import Image

path = sys.argv[1]
# image_seq_length as the fixture's processor_config.json gives it (5.12.1 does not read it)
processor = transformers.AutoProcessor.from_pretrained(path, image_seq_length=4)
image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (16, 16, 3), dtype=np.uint8))
print("transformers", transformers.__version__, "prompt '' with 1 image")
try:
    processor(text="", images=[image], return_tensors="pt")
    print("accepted")
except Exception as error:  # noqa: BLE001 - the message is the result
    print("raised", repr(error))
