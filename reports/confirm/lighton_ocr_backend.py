"""LightOnOCR through vLLM's Transformers backend on the Legacy path (vLLM and transformers only)

    .venv/bin/conformance exec --transformers 5.12.1 -- \
        .venv/bin/python reports/confirm/lighton_ocr_backend.py CHECKPOINT

CHECKPOINT: this project's tiny lighton_ocr fixture (`conformance fixtures build --fixtures
lighton_ocr`, under the same transformers version) or lightonai/LightOnOCR-1B-1025.

LightOnOcrProcessor exposes `image_end_token` (<|vision_end|>, from the tokenizer) and counts it
among `image_token_ids`, but writes only <|image_pad|> tokens for an image. Readings:
1. the processor's image tokens, and the text the backend's dummy-inputs builder writes for one
   image (`get_dummy_text`: start token + image token + `image_end_token`);
2. the backend's processor on its own dummy image (as vLLM's profiling builds it);
3. the backend's processor on a prompt with one <|image_pad|> more than images.
Exit 1 when reading 2 fails (lighton-ocr-legacy-dummy-end-token reproduces).
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
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
config = ModelConfig(model=path, model_impl="transformers", max_model_len=2048)
processor = MULTIMODAL_REGISTRY.create_processor(config)
hf = processor.info.get_hf_processor()
dummy = processor.dummy_inputs
text = dummy.get_dummy_text({"image": 1})
print(f"1. image_token {hf.image_token!r}, image_end_token {hf.image_end_token!r}, "
      f"image_token_ids {hf.image_token_ids}; backend dummy text {text!r}")

reproduced = False
data = dummy.get_dummy_mm_data(2048, {"image": 1}, {})
try:
    out = processor(text, processor.info.parse_mm_data(data), hf_processor_mm_kwargs={})
    read = f"placed: {out['mm_placeholders']['image'][0].length} positions"
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    read = f"{type(error).__name__}: {str(error)[:200]}"
    reproduced = True
print(f"2. backend, its own dummy image {data['image'][0].size}: {read}")

image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (16, 16, 3), dtype=np.uint8))
try:
    processor("<|image_pad|><|image_pad|>", processor.info.parse_mm_data({"image": [image]}),
              hf_processor_mm_kwargs={})
    read = "accepted"
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    cause = error.__cause__ or error.__context__
    read = (f"{type(error).__name__}: ...{str(error)[-60:]!r}; caused by "
            f"{type(cause).__name__ if cause else None}")
print(f"3. backend, two <|image_pad|> for one image: {read}")
sys.exit(1 if reproduced else 0)

# Measured 2026-12-04, vLLM 0.31.0 (.venv), CPU, on the tiny lighton_ocr fixture built for each
# version (exit 1 on 5.12.1 and 5.14.1, 0 on 5.17.0):
#   1. image_token '<|image_pad|>', image_end_token '<|vision_end|>', image_token_ids
#      [12, 11, 10]; backend dummy text '<|image_pad|><|vision_end|>'  (every version)
#   2. 5.12.1, 5.14.1: ValueError: The expanded prompt holds 17 image token(s) but
#      LightOnOcrProcessor accounts for 16 across 1 image item(s).
#      5.17.0: placed: 16 positions (the Offsets path leaves <|vision_end|> as text)
#   3. 5.12.1, 5.14.1: ValueError "Failed to apply LightOnOcrProcessor ...", caused by
#      StopIteration; 5.17.0: accepted
