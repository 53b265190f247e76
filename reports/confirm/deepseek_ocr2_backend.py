"""DeepSeek-OCR-2 through vLLM's Transformers backend, with vLLM and transformers only (vLLM has
no native DeepseekOcr2ForConditionalGeneration: the HF model is the only other implementation).

    .venv/bin/conformance exec --transformers 5.25.0 -- \
        .venv/bin/python reports/confirm/deepseek_ocr2_backend.py CHECKPOINT

CHECKPOINT: deepseek-community/DeepSeek-OCR-2, or this project's tiny deepseek_ocr2 fixture built
under the same transformers version. Two images: a wide one (400x51), which
DeepseekOcr2ImageProcessor cuts into tiles (pixel_values_local, num_local_patches per image),
and a small one (16x16), which it does not. Readings:
1. DeepseekOcr2Processor on "<image><image>" with both images, asked for mm_token_type_ids (the
   backend's Legacy path, transformers < 5.15), then for text replacement offsets (its Offsets
   path): whether each is returned, and how many replacements;
2. whether it defines `_get_num_multimodal_tokens` (the backend's image budget and engine); if
   so its counts for 10000x10000 (the backend's probe), 1024x1024, 400x51 and 16x16;
3. the processor on a text-only prompt (the HF reference's text-only request);
4. the image processor's fields for [small], [wide] and [small, wide]: pixel_values_local is
   written only when some image of the call has tiles;
5. the backend's processor, one request per image list: each item's fields and the rows of
   pixel_values_local it holds, beside num_local_patches; then the backend's image budget
   (vLLM's get_mm_max_toks_per_item) against the wide image's placeholder;
6. one greedy step through the backend's engine, and the HF model's, for the small image and
   for the wide one;
7. DeepseekOcr2Processor on "<image><image>" with one image (one placeholder too many: the
   `errors` check's case), then the backend's processor on it.
Exit 1 when an item's tiles in the backend differ from num_local_patches (reproduces), else 0.
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
rng = np.random.default_rng(0)
WIDE = Image.fromarray(rng.integers(0, 256, (51, 400, 3), dtype=np.uint8))
SMALL = Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8))
PROMPT = "<image>\nFree OCR. "
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"


def shape(value) -> str:
    return str(list(value.shape)) if hasattr(value, "shape") else f"list of {len(value)}"


hf = transformers.AutoProcessor.from_pretrained(path)
for ask in ("return_mm_token_type_ids", "return_text_replacement_offsets"):
    try:
        out = hf(text="<image><image>", images=[WIDE, SMALL], **{ask: True})
        offsets = out.get("text_replacement_offsets")
        print(f"1. DeepseekOcr2Processor('<image><image>', [wide, small], {ask}=True): "
              f"mm_token_type_ids returned: {'mm_token_type_ids' in out}; text replacement "
              f"offsets: {None if offsets is None else len(offsets[0])}")
    except Exception as error:  # noqa: BLE001 - the exception itself is the result
        print(f"1. DeepseekOcr2Processor(..., {ask}=True) raised {one_line(error)}")

counter = getattr(hf, "_get_num_multimodal_tokens", None)
print(f"2. DeepseekOcr2Processor defines _get_num_multimodal_tokens: {counter is not None}")
if counter is not None:
    sizes = [(10000, 10000), (1024, 1024), (51, 400), (16, 16)]
    counts = counter(image_sizes=sizes)
    print(f"   (height, width) {sizes}: num_image_tokens {list(counts['num_image_tokens'])}, "
          f"num_image_patches {list(getattr(counts, 'num_image_patches', None) or [])}")

try:
    print(f"3. DeepseekOcr2Processor(text-only prompt) returns {sorted(hf(text='Free OCR. '))}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print(f"3. DeepseekOcr2Processor(text-only prompt) raised {one_line(error)}")

for name, images in (("[small]", [SMALL]), ("[wide]", [WIDE]), ("[small, wide]", [SMALL, WIDE])):
    out = hf.image_processor(images, return_tensors="pt")
    print(f"4. image processor {name}: fields {sorted(out)}, num_local_patches "
          f"{list(out['num_local_patches'])}")

config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                     limit_mm_per_prompt={"image": 2})
print(f"   architecture resolved: {config.architecture}")
reproduced = False
try:
    backend = MULTIMODAL_REGISTRY.create_processor(config)
    calls = (("[wide]", [WIDE]), ("[small]", [SMALL]), ("[small, wide]", [SMALL, WIDE]))
    for name, images in calls:
        prompt = "<image>" * len(images) + "\nFree OCR. "
        out = backend(prompt, backend.info.parse_mm_data({"image": images}),
                      hf_processor_mm_kwargs={})
        for index, item in enumerate(out["mm_kwargs"]["image"]):
            local = item.get("pixel_values_local")
            tiles = int(item["num_local_patches"].data) if "num_local_patches" in item else None
            rows = None if local is None else int(local.data.shape[0])
            print(f"5. backend {name} item {index}: fields {sorted(item.keys())}; "
                  f"num_local_patches {tiles}, rows of pixel_values_local {rows}")
            reproduced |= (rows or 0) != (tiles or 0)
        ranges = [(r.offset, r.length) for r in out["mm_placeholders"]["image"]]
        print(f"   placeholders (offset, length) {ranges}")
    from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item

    budget = dict(get_mm_max_toks_per_item(backend, {"image": 1}, cache=None))
    print(f"5. backend image budget per item: {budget}")
except Exception as error:  # noqa: BLE001 - what the backend does is the result
    print(f"5. backend's processor raised {one_line(error)}")

# the HF model first: loading the backend's engine decorates transformers' classes
model = transformers.AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32)
expected = {}
for name, image in (("wide", WIDE), ("small", SMALL)):
    with torch.no_grad():
        logits = model(**hf(text=PROMPT, images=[image], return_tensors="pt")).logits
    expected[name] = int(logits[0, -1].argmax())
try:
    llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=4096,
                   limit_mm_per_prompt={"image": 1}, enforce_eager=True,
                   kv_cache_memory_bytes=1 << 26)
except Exception as error:  # noqa: BLE001 - what the engine does is the result
    llm = None
    print(f"6. backend engine: raised {one_line(error)}")
# the small image first: a failed step leaves the engine unable to take another
for name, image in (("small", SMALL), ("wide", WIDE)):
    got = "no engine"
    if llm is not None:
        try:
            result = llm.generate({"prompt": PROMPT, "multi_modal_data": {"image": [image]}},
                                  vllm.SamplingParams(temperature=0.0, max_tokens=1),
                                  use_tqdm=False)
            got = f"token {result[0].outputs[0].token_ids[0]}"
        except Exception as error:  # noqa: BLE001 - what the engine does is the result
            got = f"raised {one_line(error)}"
    print(f"6. {name} image: HF model's greedy token {expected[name]}; backend engine {got}")
try:
    out = hf(text="<image><image>\nFree OCR. ", images=[SMALL])
    print(f"7. DeepseekOcr2Processor('<image><image>', one image) returns {sorted(out)}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print(f"7. DeepseekOcr2Processor('<image><image>', one image) raised {one_line(error)}")
try:
    backend = MULTIMODAL_REGISTRY.create_processor(config)
    backend("<image><image>\nFree OCR. ", backend.info.parse_mm_data({"image": [SMALL]}),
            hf_processor_mm_kwargs={})
    print("7. the backend's processor on it raised nothing")
except Exception as error:  # noqa: BLE001 - what the backend does is the result
    cause = error.__cause__ or error.__context__
    print(f"7. the backend's processor on it raised {one_line(error)[:120]}; caused by "
          f"{None if cause is None else one_line(cause)}")
sys.exit(1 if reproduced else 0)
