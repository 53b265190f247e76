"""Video-LLaVA's images through vLLM's Transformers backend, with vLLM and transformers only
(vLLM has no native Video-LLaVA: the HF model is the only other implementation).

    .venv/bin/conformance exec --transformers 5.17.0 -- \
        .venv/bin/python reports/confirm/video_llava_backend.py CHECKPOINT

CHECKPOINT: LanguageBind/Video-LLaVA-7B-hf, or this project's tiny video_llava fixture built
under the same transformers version. Readings:
1. whether VideoLlavaProcessor's __call__ takes `return_mm_token_type_ids=True`, which the
   backend's Legacy path (transformers < 5.15) passes to locate each image, and what the
   backend's processor does with two images;
2. whether VideoLlavaProcessor defines `_get_num_multimodal_tokens`, which the backend asks for
   each image's token count (its image budget, so its engine; from vLLM 0.32.0 its dummy image);
3. the fields the HF processor returns for two images, and the fields the backend's processor
   hands the model (its mm_kwargs): the backend's encoder reads `pixel_values` (or
   `image_patches`) and nothing else;
4. one greedy step through the backend's engine with the two images, then (transformers >=
   5.24, where the image processor has the option) with `return_legacy_image_output=False`,
   which makes it return `pixel_values`. Exit 1: the engine does not generate with the
   default options (reproduces).
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import transformers  # noqa: E402
import vllm  # noqa: E402
from packaging.version import Version  # noqa: E402
from PIL import Image  # noqa: E402
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

path = sys.argv[1]
PROMPT = "USER: <image>\nWhat is in this image? And <image>? ASSISTANT:"
rng = np.random.default_rng(0)
images = [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
          for h, w in ((40, 60), (64, 32))]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"


hf = transformers.AutoProcessor.from_pretrained(path)
try:
    out = hf(text=PROMPT, images=images, return_mm_token_type_ids=True)
    print(f"1. {type(hf).__name__}(..., return_mm_token_type_ids=True) returns "
          f"mm_token_type_ids: {'mm_token_type_ids' in out}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print(f"1. {type(hf).__name__}(..., return_mm_token_type_ids=True) raised {one_line(error)}")

config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                     limit_mm_per_prompt={"image": 2})
backend = MULTIMODAL_REGISTRY.create_processor(config)
try:
    processed = backend(PROMPT, backend.info.parse_mm_data({"image": images}))
    ranges = [(r.offset, r.length) for r in processed["mm_placeholders"]["image"]]
    fields = sorted(processed["mm_kwargs"].get_data())
    print(f"   backend's processor, two images: placeholders (offset, length) {ranges}")
except Exception as error:  # noqa: BLE001 - what the backend does is the result
    processed, fields = None, None
    print(f"   backend's processor, two images: raised {one_line(error)}")

print(f"2. {type(hf).__name__} defines _get_num_multimodal_tokens: "
      f"{hasattr(hf, '_get_num_multimodal_tokens')}")

out = hf(text=PROMPT, images=images, return_tensors="pt")
print(f"3. HF processor fields: {sorted(out)} "
      f"(image processor's model_input_names {hf.image_processor.model_input_names})")
print(f"   fields the backend's processor hands the model: {fields}")


def greedy(options: dict) -> bool:
    try:
        llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32",
                       max_model_len=2048, limit_mm_per_prompt={"image": 2},
                       enforce_eager=True, kv_cache_memory_bytes=1 << 26,
                       mm_processor_kwargs=options or None)
        result = llm.generate({"prompt": PROMPT, "multi_modal_data": {"image": images}},
                              vllm.SamplingParams(temperature=0.0, max_tokens=1),
                              use_tqdm=False)
    except Exception as error:  # noqa: BLE001 - what the engine does is the result
        print(f"4. backend engine, options {options}: raised {one_line(error)}")
        return False
    print(f"4. backend engine, options {options}: generated {result[0].outputs[0].token_ids}")
    return True


generated = greedy({})
if Version(transformers.__version__) >= Version("5.24"):
    greedy({"return_legacy_image_output": False})
sys.exit(0 if generated else 1)
