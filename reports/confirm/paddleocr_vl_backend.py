"""PaddleOCR-VL through vLLM's Transformers backend and through native vLLM, with vLLM and
transformers only.

    .venv/bin/conformance exec --transformers 5.17.0 -- \
        .venv/bin/python reports/confirm/paddleocr_vl_backend.py CHECKPOINT

CHECKPOINT: PaddlePaddle/PaddleOCR-VL, or this project's tiny paddleocr_vl fixture built under
the same transformers version. Readings:
1. whether PaddleOCRVLProcessor defines `_get_num_multimodal_tokens`, which the backend asks
   for each image's token count (its budget, its dummy image, and on the Legacy path, below
   transformers 5.15, where each image's placeholder lies), and what the backend's processor
   does with one image in the checkpoint's prompt;
2. whether transformers' AutoModel can build the model from the checkpoint's config (the
   backend builds its model with `AutoModel.from_config`);
3. a prompt with two image placeholders and one image: what the HF processor makes of it (the
   image tokens it writes), then native vLLM's processor and the backend's.
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
IMAGE = "<|IMAGE_START|><|IMAGE_PLACEHOLDER|><|IMAGE_END|>"
PROMPT = "<|begin_of_sentence|>User: {}OCR:\nAssistant: "
image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (51, 400, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:160]}"


def processor_of(impl: str):
    config = ModelConfig(model=path, model_impl=impl, max_model_len=4096,
                         limit_mm_per_prompt={"image": 2})
    return MULTIMODAL_REGISTRY.create_processor(config)


def placed(impl: str, prompt: str) -> str:
    try:
        out = processor_of(impl)(prompt, processor_of(impl).info.parse_mm_data(
            {"image": [image]}))
    except Exception as error:  # noqa: BLE001 - what each implementation does is the result
        return "raised " + one_line(error)
    ranges = [(r.offset, r.length) for r in out["mm_placeholders"]["image"]]
    return f"accepted: image placeholders (offset, length) {ranges}"


hf = transformers.AutoProcessor.from_pretrained(path)
print(f"1. {type(hf).__name__} defines _get_num_multimodal_tokens: "
      f"{hasattr(hf, '_get_num_multimodal_tokens')}")
print(f"   backend, one image in the prompt: {placed('transformers', PROMPT.format(IMAGE))}")

config = transformers.AutoConfig.from_pretrained(path)
try:
    with torch.device("meta"):
        built = transformers.AutoModel.from_config(config)
    print(f"2. AutoModel.from_config builds {type(built).__name__}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print(f"2. AutoModel.from_config raised {one_line(error)}")

two = PROMPT.format(IMAGE + IMAGE)
token = hf.tokenizer.convert_tokens_to_ids("<|IMAGE_PLACEHOLDER|>")
try:
    ids = hf(text=two, images=[image], return_tensors="pt")["input_ids"][0].tolist()
    runs, run = [], 0
    for i in ids + [None]:
        if i == token:
            run += 1
        elif run:
            runs, run = runs + [run], 0
    print(f"3. HF processor, 2 placeholders for 1 image: runs of <|IMAGE_PLACEHOLDER|> {runs}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print(f"3. HF processor, 2 placeholders for 1 image: raised {one_line(error)}")
for impl in ("vllm", "transformers"):
    print(f"   {impl}: {placed(impl, two)}")


# Measured 2026-12-04 on this project's tiny paddleocr_vl fixture: see
# reports/confirm/paddleocr_vl_backend.txt.
