"""Does vLLM's Transformers backend honour processor options scoped by modality? (vLLM and
transformers only.)

    python scoped_options.py CHECKPOINT PLACEHOLDER OPTION=VALUE [OPTION=VALUE ...]

vLLM takes processor options flat (`mm_processor_kwargs={"crop_to_patches": False}`) or scoped
by modality as transformers groups them (`{"images_kwargs": {"crop_to_patches": False}}`),
model-level (`LLM(mm_processor_kwargs=...)`) or per request (`hf_processor_mm_kwargs`). One
prompt with two images (60x40 and 32x64) through each implementation's processor in each of the
four forms, and the HF processor called with the options flat (the reference where native vLLM
has no model). Every run starts from the processor option classes' defaults as transformers
defines them. After the backend's model-scoped run, the option classes whose defaults now hold
a scoped group (`images_kwargs` inside `images_kwargs`) are printed: the count helper writes the
options it is given into them. Exit 1: a backend result in a scoped form differs from its own
in the flat form of the same level (reproduces).
"""

import copy
import sys

import numpy as np
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY

path, placeholder = sys.argv[1], sys.argv[2]
options = {}
for pair in sys.argv[3:]:
    name, _, text = pair.partition("=")
    options[name] = {"True": True, "False": False}.get(text, int(text) if text.isdigit() else text)
scoped = {"images_kwargs": dict(options)}
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


def restore(pristine: dict) -> None:
    for cls, saved in pristine.items():
        cls._defaults = copy.deepcopy(saved)


def written(pristine: dict) -> list[str]:
    """The option classes whose defaults now hold a scoped group inside a group."""
    return [f"{cls.__name__}._defaults[{group!r}][{inner!r}]"
            for cls in pristine for group, value in vars(cls)["_defaults"].items()
            if isinstance(value, dict)
            for inner in value if inner.endswith("_kwargs") and inner not in pristine[cls].get(
                group, {})]


def run(impl: str, model_level: dict, per_request: dict, pristine: dict) -> str:
    restore(pristine)
    config = ModelConfig(model=path, model_impl=impl, limit_mm_per_prompt={"image": 2},
                         mm_processor_kwargs=model_level or None)
    try:
        processor = MULTIMODAL_REGISTRY.create_processor(config)
        out = processor(prompt, processor.info.parse_mm_data({"image": images}),
                        hf_processor_mm_kwargs=per_request)
    except Exception as error:  # what the processor says is the evidence
        return f"raises {type(error).__name__}: {' '.join(str(error).split())[:300]}"
    ranges = [(r.offset, r.length) for r in out["mm_placeholders"]["image"]]
    return f"{len(out['prompt_token_ids'])} prompt ids, image (offset, length) {ranges}"


def hf(pristine: dict, **given: object) -> str:
    restore(pristine)
    processor = AutoProcessor.from_pretrained(path)
    ids = processor(text=prompt, images=images, **given)["input_ids"][0]
    return f"{len(ids)} prompt ids"


# the classes' defaults before any run (a first processor loads their modules)
MULTIMODAL_REGISTRY.create_processor(ModelConfig(model=path, model_impl="transformers",
                                                 limit_mm_per_prompt={"image": 2}))
pristine = defaults()
print(f"HF processor, no options: {hf(pristine)}; options flat (call kwargs): "
      f"{hf(pristine, **options)}; scoped (call kwarg): {hf(pristine, **scoped)}")
FORMS = (("model-flat", options, {}), ("model-scoped", scoped, {}),
         ("request-flat", {}, options), ("request-scoped", {}, scoped))
found = {}
for impl in ("vllm", "transformers"):
    for form, model_level, per_request in FORMS:
        try:
            found[impl, form] = run(impl, model_level, per_request, pristine)
        except Exception as error:  # no native model: vLLM refuses the architecture
            found[impl, form] = f"no processor: {' '.join(str(error).split())[:160]}"
        print(f"model_impl={impl!r}, {form}: {found[impl, form]}")
        if impl == "transformers" and form == "model-scoped":
            print(f"  option defaults written by it: {written(pristine) or 'none'}")
            try:  # a deployment's next request, with the defaults the first one left
                config = ModelConfig(model=path, model_impl=impl,
                                     limit_mm_per_prompt={"image": 2}, mm_processor_kwargs=scoped)
                processor = MULTIMODAL_REGISTRY.create_processor(config)
                processor(prompt, processor.info.parse_mm_data({"image": images}))
                print("  a second request: processed")
            except Exception as error:
                cause = error.__cause__ or error
                print(f"  a second request: raises {type(error).__name__}: "
                      f"{' '.join(str(error).split())[:120]} ... (cause {type(cause).__name__}: "
                      f"{cause})")
# Engine order: the boolean options flipped model-level, the request giving them flat (vLLM's
# merge: the request's keys over the model's), against native vLLM given the same.
flipped = {k: not v for k, v in options.items() if isinstance(v, bool)}
if flipped:
    for impl in ("vllm", "transformers"):
        try:
            found[impl, "engine order"] = run(impl, flipped, options, pristine)
        except Exception as error:  # no native model: vLLM refuses the architecture
            found[impl, "engine order"] = f"no processor: {' '.join(str(error).split())[:160]}"
        print(f"model_impl={impl!r}, {flipped} model-level and {options} per request: "
              f"{found[impl, 'engine order']}")
differs = any(found["transformers", f"{level}-scoped"] != found["transformers", f"{level}-flat"]
              for level in ("model", "request"))
sys.exit(1 if differs else 0)

# Measured 2026-12-04 (reports/confirm/scoped_options.txt has the lines): aya_vision '<image>'
# crop_to_patches=False. The HF processor: 33 prompt ids without the option, 19 with it flat or
# scoped. The backend (vLLM 0.31.0): model-flat 19; model-scoped raises 'AyaVisionProcessor
# returned 2 row(s) of image data for 2 image(s), which cannot be split into the [1, 3] row(s)
# per image' on 5.17.0 and 5.20.2 (Offsets path), 'The expanded prompt holds 14 image token(s)
# but AyaVisionProcessor accounts for 24' on 5.12.1 and 5.14.1 (Legacy path); it leaves
# AyaVisionProcessorKwargs._defaults['images_kwargs']['images_kwargs'] behind, and the next
# request raises 'Failed to apply AyaVisionProcessor ... (cause TypeError:
# merged_typed_dict.__init__() got an unexpected keyword argument 'images_kwargs')' (exit 1).
# On 5.25.0 model-scoped gives 19 and nothing is written. vLLM 0.33.0 on 5.17.0: as 0.31.0.
# smolvlm do_image_splitting=False (5.17.0): the backend 18 prompt ids in all four forms, as the
# HF processor flat or scoped; native vLLM 145 (it splits) in both scoped forms (exit 0).
