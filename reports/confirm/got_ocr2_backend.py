"""GOT-OCR 2.0 through vLLM's Transformers backend, with vLLM and transformers only (vLLM has no
native GotOcr2ForConditionalGeneration: the HF model is the only other implementation).

    .venv/bin/conformance exec --transformers 5.17.0 -- \
        .venv/bin/python reports/confirm/got_ocr2_backend.py CHECKPOINT

CHECKPOINT: stepfun-ai/GOT-OCR-2.0-hf, or this project's tiny got_ocr2 fixture built under the
same transformers version. The prompt is a user's own text holding one image as GOT's processor
writes it (<img><imgpad></img>), in Qwen's chat format. Readings:
1. what GotOcr2Processor returns for that prompt and one image, asked for
   `return_mm_token_type_ids=True` (the backend's Legacy path, transformers < 5.15, and the
   harness's HF reference ask so): how many <imgpad> the ids hold (the processor's expansion:
   num_image_tokens per tile) and whether mm_token_type_ids is there; then the HF model's
   forward on that output;
2. whether GotOcr2Processor defines `_get_num_multimodal_tokens`, which the backend asks for each
   image's token count (its image budget, so its engine; from vLLM 0.32.0 its dummy image);
3. the backend's processor on the same prompt: the image's placeholder (offset, length);
4. GotOcr2Processor on a text-only prompt (the HF reference's text-only request);
5. one greedy step through the backend's engine, with the image and text-only. Exit 1: no token
   with the image.
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
image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 60, 3), dtype=np.uint8))
PROMPT = "<|im_start|>user\n<img><imgpad></img>\nOCR: <|im_end|><|im_start|>assistant\n"
TEXT_ONLY = ("<|im_start|>user\nA question that shows nothing at all<|im_end|>"
             "<|im_start|>assistant\n")
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"


hf = transformers.AutoProcessor.from_pretrained(path)
pad = hf.tokenizer.convert_tokens_to_ids("<imgpad>")
try:
    out = hf(text=PROMPT, images=[image], return_mm_token_type_ids=True)
    ids = list(out["input_ids"][0])
    print(f"1. GotOcr2Processor(user text, one image, return_mm_token_type_ids=True): the ids hold "
          f"{ids.count(pad)} <imgpad> (the prompt 1); returns mm_token_type_ids: "
          f"{'mm_token_type_ids' in out}")
    model = transformers.AutoModelForImageTextToText.from_pretrained(path)
    try:
        logits = model(**hf(text=PROMPT, images=[image], return_tensors="pt")).logits
        print(f"   the HF model's forward on it: logits {tuple(logits.shape)}")
    except Exception as error:  # noqa: BLE001 - the exception itself is the result
        print(f"   the HF model's forward on it raised {one_line(error)}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print(f"1. GotOcr2Processor(user text, one image) raised {one_line(error)}")

print(f"2. GotOcr2Processor defines _get_num_multimodal_tokens: "
      f"{hasattr(hf, '_get_num_multimodal_tokens')}")

config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                     limit_mm_per_prompt={"image": 1})
try:
    backend = MULTIMODAL_REGISTRY.create_processor(config)
    processed = backend(PROMPT, backend.info.parse_mm_data({"image": [image]}))
    ranges = [(r.offset, r.length) for r in processed["mm_placeholders"]["image"]]
    print(f"3. backend's processor, one image: placeholders (offset, length) {ranges}")
except Exception as error:  # noqa: BLE001 - what the backend does is the result
    print(f"3. backend's processor, one image: raised {one_line(error)}")

try:
    out = hf(text=TEXT_ONLY)
    print(f"4. GotOcr2Processor(text-only prompt) returns {sorted(out)}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print(f"4. GotOcr2Processor(text-only prompt) raised {one_line(error)}")

try:
    llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=4096,
                   limit_mm_per_prompt={"image": 1}, enforce_eager=True,
                   kv_cache_memory_bytes=1 << 26)
except Exception as error:  # noqa: BLE001 - what the engine does is the result
    print(f"5. backend engine: raised {one_line(error)}")
    sys.exit(1)
params = vllm.SamplingParams(temperature=0.0, max_tokens=1)
generated = False
for label, request in (("one image", {"prompt": PROMPT, "multi_modal_data": {"image": [image]}}),
                       ("text-only", {"prompt": TEXT_ONLY})):
    try:
        result = llm.generate(request, params, use_tqdm=False)
        print(f"5. backend engine, {label}: generated {result[0].outputs[0].token_ids}")
        generated = generated or label == "one image"
    except Exception as error:  # noqa: BLE001 - what the engine does is the result
        print(f"5. backend engine, {label}: raised {one_line(error)}")
sys.exit(0 if generated else 1)
