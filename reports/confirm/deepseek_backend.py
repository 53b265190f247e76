"""DeepSeek-VL (and its hybrid, the 7B) and Janus(-Pro) through vLLM's Transformers backend, with
vLLM and transformers only (vLLM has no native model for any: the HF model is the only other
implementation).

    .venv/bin/conformance exec --transformers 5.17.0 -- \
        .venv/bin/python reports/confirm/deepseek_backend.py CHECKPOINT

CHECKPOINT: deepseek-community/deepseek-vl-1.3b-chat, deepseek-community/deepseek-vl-7b-chat or
deepseek-community/Janus-Pro-1B, or this project's tiny deepseek_vl, deepseek_vl_hybrid or janus
fixture built under the same transformers version.
The prompt holds two adjacent images (the processor's own `image_token` twice). Readings (the
processor is whatever AutoProcessor loads: DeepseekVLProcessor, DeepseekVLHybridProcessor or
JanusProcessor):
1. what the HF processor returns when asked, as the backend's Legacy path (transformers < 5.15)
   and the harness's HF reference ask, for `return_mm_token_type_ids=True`: whether
   mm_token_type_ids is there, the processor's `image_token_id` (what ProcessorMixin's
   create_mm_token_type_ids marks), how many image tokens the ids hold and how many positions
   it marks, and the marked positions' contiguous runs (without a token count, all that says
   where one image ends and the next begins);
2. whether the processor defines `_get_num_multimodal_tokens`, which the backend asks for each
   image's token count (its image budget, so its engine; from vLLM 0.32.0 its dummy image);
3. the backend's processor on the same prompt: each image's placeholder (offset, length); and
   the backend's own dummy image (what vLLM profiles with: `get_dummy_mm_inputs`), its
   embeddings;
4. one greedy step through the backend's engine with the two images. Exit 1: no token.
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
rng = np.random.default_rng(0)
images = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
          for h, w in ((40, 60), (64, 32))]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"


def runs(positions: list[int]) -> list[tuple[int, int]]:
    """(offset, length) of each run of consecutive positions."""
    found: list[list[int]] = []
    for p in positions:
        if found and found[-1][-1] == p - 1:
            found[-1].append(p)
        else:
            found.append([p])
    return [(r[0], len(r)) for r in found]


hf = transformers.AutoProcessor.from_pretrained(path)
name = type(hf).__name__
PROMPT = f"User: {hf.image_token}{hf.image_token}What is in these images?\n\nAssistant:"
config = transformers.AutoConfig.from_pretrained(path)
out = hf(text=PROMPT, images=images, return_mm_token_type_ids=True)
ids = list(out["input_ids"][0])
image_id = getattr(config, "image_token_id", None)
print(f"1. {name}(..., return_mm_token_type_ids=True) returns mm_token_type_ids: "
      f"{'mm_token_type_ids' in out}; {name}.image_token_id = {getattr(hf, 'image_token_id', None)}"
      f" (config.image_token_id {image_id}); the ids hold {ids.count(image_id)} image tokens")
if "mm_token_type_ids" in out:
    marked = [i for i, t in enumerate(out["mm_token_type_ids"][0]) if t == 1]
    print(f"   it marks {len(marked)} positions as image, in runs (offset, length) {runs(marked)}")

print(f"2. {name} defines _get_num_multimodal_tokens: {hasattr(hf, '_get_num_multimodal_tokens')}")

model_config = ModelConfig(model=path, model_impl="transformers", max_model_len=2048,
                           limit_mm_per_prompt={"image": 2})
try:
    backend = MULTIMODAL_REGISTRY.create_processor(model_config)
    processed = backend(PROMPT, backend.info.parse_mm_data({"image": images}))
    ranges = [(r.offset, r.length) for r in processed["mm_placeholders"]["image"]]
    print(f"3. backend's processor, two images: placeholders (offset, length) {ranges}")
except Exception as error:  # noqa: BLE001 - what the backend does is the result
    print(f"3. backend's processor, two images: raised {one_line(error)}")
try:
    placed = backend.get_dummy_mm_inputs({"image": 1})["mm_placeholders"]["image"]
    print(f"   backend's dummy image: {sum(int(r.get_num_embeds()) for r in placed)} embeddings")
except Exception as error:  # noqa: BLE001 - what the backend does is the result
    print(f"   backend's dummy image: raised {one_line(error)}")

try:
    llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=2048,
                   limit_mm_per_prompt={"image": 2}, enforce_eager=True,
                   kv_cache_memory_bytes=1 << 26)
    result = llm.generate({"prompt": PROMPT, "multi_modal_data": {"image": images}},
                          vllm.SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)
except Exception as error:  # noqa: BLE001 - what the engine does is the result
    print(f"4. backend engine: raised {one_line(error)}")
    sys.exit(1)
print(f"4. backend engine: generated {result[0].outputs[0].token_ids}")
