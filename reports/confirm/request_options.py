"""Does vLLM's Transformers backend honour processor options given per request? (vLLM and
transformers only.)

    python request_options.py CHECKPOINT PLACEHOLDER OPTION=VALUE [OPTION=VALUE ...]

A request's own `mm_processor_kwargs` reach the multimodal processor as
`hf_processor_mm_kwargs`; each option overrides the model-level one of its name
(`LLM(mm_processor_kwargs=...)`). One prompt with two images (60x40 and 32x64) through each
implementation's processor twice: a processor built with the options model-level, and a
processor built without them that is given them per request. Every run starts from the
processor option classes' defaults as transformers defines them (their `_get_num_multimodal_tokens`
writes the options it is given into them: a model-level run would otherwise leave them there
for the per-request run). Exit 1: the backend's per-request result differs from its
model-level one or from native vLLM's per-request one (reproduces).
"""

import copy
import sys

import numpy as np
import transformers
import vllm
from PIL import Image
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY

path, placeholder = sys.argv[1], sys.argv[2]
options = {}
for pair in sys.argv[3:]:
    name, _, text = pair.partition("=")
    options[name] = {"True": True, "False": False}.get(text, int(text) if text.isdigit() else text)
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, options {options}")

rng = np.random.RandomState(0)
images = [Image.fromarray(rng.randint(0, 256, (h, w, 3), dtype=np.uint8))
          for h, w in ((40, 60), (64, 32))]
prompt = f"a {placeholder} b {placeholder}"


def defaults() -> dict:
    """Every loaded transformers class holding processor option defaults, and its defaults."""
    found = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("transformers.") and module is not None:
            for value in list(vars(module).values()):
                if isinstance(value, type) and isinstance(vars(value).get("_defaults"), dict):
                    found[value] = copy.deepcopy(vars(value)["_defaults"])
    return found


def run(impl: str, model_level: dict, per_request: dict, pristine: dict) -> str:
    for cls, saved in pristine.items():
        cls._defaults = copy.deepcopy(saved)
    config = ModelConfig(model=path, model_impl=impl, limit_mm_per_prompt={"image": 2},
                         mm_processor_kwargs=model_level or None)
    try:
        processor = MULTIMODAL_REGISTRY.create_processor(config)
        out = processor(prompt, processor.info.parse_mm_data({"image": images}),
                        hf_processor_mm_kwargs=per_request)
    except Exception as error:  # what the processor says is the evidence
        return f"raises {type(error).__name__}: {' '.join(str(error).split())[:240]}"
    ranges = [(r.offset, r.length) for r in out["mm_placeholders"]["image"]]
    return f"{len(out['prompt_token_ids'])} prompt ids, image (offset, length) {ranges}"


# the classes' defaults before any run (a first processor loads their modules)
MULTIMODAL_REGISTRY.create_processor(ModelConfig(model=path, model_impl="transformers",
                                                 limit_mm_per_prompt={"image": 2}))
pristine = defaults()
found = {}
for impl in ("vllm", "transformers"):
    for level, model_level, per_request in (("model-level", options, {}),
                                            ("per request", {}, options)):
        try:
            found[impl, level] = run(impl, model_level, per_request, pristine)
        except Exception as error:  # no native model: vLLM refuses the architecture
            found[impl, level] = f"no processor: {' '.join(str(error).split())[:160]}"
        print(f"model_impl={impl!r}, options {level}: {found[impl, level]}")
backend = found["transformers", "per request"]
native = found["vllm", "per request"]
differs = backend != found["transformers", "model-level"] or (
    not native.startswith("no processor") and backend != native)
sys.exit(1 if differs else 0)

# Measured 2026-12-03, vLLM 0.31.0 (.venv), this project's tiny fixtures (their checkpoint
# folders under the fixture cache; transformers 5.14.1 through its overlay):
#   idefics3 '<image>' do_image_splitting=False, transformers 5.17.0 (Offsets path):
#   model_impl='vllm', options model-level: 19 prompt ids, image (offset, length) [(3, 7), (12, 7)]
#   model_impl='vllm', options per request: 19 prompt ids, image (offset, length) [(3, 7), (12, 7)]
#   model_impl='transformers', options model-level: raises ValueError: Idefics3Processor returned
#     1 row(s) of image data for 2 image(s), which cannot be split into the [0, 0] row(s) per
#     image ... (the known finding idefics3-no-splitting-zero-patches)
#   model_impl='transformers', options per request: raises ValueError: Idefics3Processor returned
#     1 row(s) of image data for 2 image(s), which cannot be split into the [5, 3] row(s) per
#     image ... (rows counted as with splitting: the request's option never reaches the count)
#                                                                              (exit 1)
#   aya_vision '<image>' crop_to_patches=False, transformers 5.17.0 (no native model since vLLM
#   0.24.0: the backend's own model-level result is the reference):
#   model_impl='transformers', options model-level: 19 prompt ids, image (offset, length)
#     [(3, 7), (12, 7)]
#   model_impl='transformers', options per request: raises ValueError: AyaVisionProcessor
#     returned 2 row(s) of image data for 2 image(s), which cannot be split into the [1, 3]
#     row(s) per image ...                                                     (exit 1)
#   aya_vision, transformers 5.14.1 (Legacy path): model-level as on 5.17.0; per request:
#     raises ValueError: The expanded prompt holds 14 image token(s) but AyaVisionProcessor
#     accounts for 24 across 2 image item(s).                                  (exit 1)
#   idefics3, transformers 5.14.1: all four 19 prompt ids, [(3, 7), (12, 7)]   (exit 0)
#   qwen2_vl '<|vision_start|><|image_pad|><|vision_end|>' max_pixels=784, 5.17.0 (a control):
#     all four 10 prompt ids, [(3, 1), (8, 1)]                                 (exit 0)
# The cause, in vLLM 0.31.0's transformers/multimodal.py: the Offsets path's
# `_get_num_patches_per_image` asks `self.info.get_hf_processor()` (built without the request's
# options) with `self.info.ctx.get_merged_mm_kwargs({})` (the model-level options alone); the
# Legacy path's `_get_num_multimodal_tokens` passes the same model-level options. Every other
# step takes `hf_processor_mm_kwargs`, so the rows or tokens a request's options change are
# counted as if it gave none.
