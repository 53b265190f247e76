"""EXAONE 4.5: native vLLM feeds its vision tower pixels nobody normalised (vLLM and transformers
only).

    .venv/bin/conformance exec --transformers 5.17.0 -- \
        .venv/bin/python reports/confirm/exaone4_5_native_pixels.py CHECKPOINT

CHECKPOINT: LGAI-EXAONE/EXAONE-4.5-33B, or this project's tiny exaone4_5 fixture built under the
same transformers version. Native vLLM's Exaone4_5_ForConditionalGeneration inherits
Qwen2.5-VL's `supports_mm_device_do_normalize = True`, so vLLM turns mm_device_do_normalize on
by default and its processor returns raw pixels (do_rescale and do_normalize forced off),
leaving the normalisation to the vision tower's `input_norm`. Qwen2.5-VL passes its tower
`build_mm_input_norm(model_config)`; EXAONE 4.5's own __init__ (vLLM 0.31.0, 0.32.0) builds its
tower without one, so the tower's input_norm is the identity. Readings, float32 on CPU, one
400x400 image:
1. native vLLM's mm_device_do_normalize and the pixel_values its processor returns beside the HF
   processor's (range, largest difference); the backend's processor beside them;
2. the tower's input_norm class in the model native vLLM loads;
3. native's tower on its own processor's pixels, then on the HF processor's, each against the
   HF model's image features (get_image_features) for the same image;
4. native vLLM with mm_device_do_normalize=False: its processor's pixels and its tower's output
   against the HF model's.
Exit 1 when 3.'s first comparison differs (reproduces).
"""

import gc
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
PROMPT = ("[|user|]\n<vision><|image_pad|></vision>What is in this image?[|endofturn|]\n"
          "[|assistant|]")
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (400, 400, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

hf_processor = transformers.AutoProcessor.from_pretrained(path)
hf_inputs = hf_processor(text=PROMPT, images=[image], return_tensors="pt")
hf_pixels, grid = hf_inputs["pixel_values"], hf_inputs["image_grid_thw"]
model = transformers.Exaone4_5_ForConditionalGeneration.from_pretrained(
    path, dtype=torch.float32).eval()
with torch.inference_mode():
    hf_features = torch.cat(list(model.model.get_image_features(hf_pixels, grid).pooler_output))
model = None
gc.collect()


def processed(impl: str, **options: object) -> tuple[torch.Tensor, bool]:
    config = ModelConfig(model=path, model_impl=impl, max_model_len=1024,
                         limit_mm_per_prompt={"image": 1}, **options)
    mm = MULTIMODAL_REGISTRY.create_processor(config)
    out = mm(PROMPT, mm.info.parse_mm_data({"image": [image]}))
    return (out["mm_kwargs"]["image"][0]["pixel_values"].data,
            config.multimodal_config.mm_device_do_normalize)


def gap(a: torch.Tensor, b: torch.Tensor) -> str:
    cosine = torch.nn.functional.cosine_similarity(a.flatten(), b.flatten(), dim=0).item()
    return f"max abs {(a - b).abs().max().item():.3g}, cosine {cosine:.6f}"


def pixels_line(label: str, pixels: torch.Tensor) -> str:
    return (f"{label}: range [{pixels.min().item():.3g}, {pixels.max().item():.3g}], "
            f"vs the HF processor's max abs {(pixels - hf_pixels).abs().max().item():.3g}")


native_pixels, on = processed("vllm")
backend_pixels, _ = processed("transformers")
print(f"1. native vLLM: mm_device_do_normalize={on}")
print("   " + pixels_line("HF processor pixel_values", hf_pixels))
print("   " + pixels_line("native vLLM's processor", native_pixels))
print("   " + pixels_line("the backend's processor", backend_pixels))


def tower(options: dict) -> tuple[str, list[torch.Tensor]]:
    llm = vllm.LLM(model=path, model_impl="vllm", dtype="float32", max_model_len=1024,
                   enforce_eager=True, kv_cache_memory_bytes=1 << 26,
                   limit_mm_per_prompt={"image": 1}, **options)
    (native,) = llm.apply_model(lambda m: m)  # in process: the model object itself
    visual = native.visual
    with torch.inference_mode():
        outs = [visual(p, grid_thw=grid.tolist()) for p in (native_pixels, hf_pixels)]
    name = type(visual.input_norm).__name__
    del llm, native, visual
    gc.collect()
    return name, outs


norm, (own, from_hf) = tower({})
print(f"2. native vLLM's vision tower: input_norm {norm}")
print(f"3. native tower on its processor's pixels vs the HF model: {gap(own, hf_features)}")
print(f"   native tower on the HF processor's pixels vs the HF model: {gap(from_hf, hf_features)}")
off_pixels, off = processed("vllm", mm_device_do_normalize=False)
native_pixels = off_pixels
_, (own_off, _) = tower({"mm_device_do_normalize": False})
print(f"4. mm_device_do_normalize={off}: " + pixels_line("native vLLM's processor", off_pixels))
print(f"   native tower on those pixels vs the HF model: {gap(own_off, hf_features)}")
sys.exit(1 if not torch.allclose(own, hf_features, atol=1e-5, rtol=1e-4) else 0)
