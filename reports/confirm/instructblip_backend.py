"""InstructBLIP (and BLIP-2, whose Blip2Processor prepends its query tokens the same way) through
vLLM's Transformers backend, with vLLM and transformers only (vLLM has no native InstructBLIP: the
HF model is the only other implementation).

    .venv/bin/conformance exec --transformers 5.17.0 -- \
        .venv/bin/python reports/confirm/instructblip_backend.py CHECKPOINT

CHECKPOINT: Salesforce/instructblip-vicuna-7b or Salesforce/blip2-opt-2.7b, or this project's tiny
instructblip or blip_2 fixture built under the same transformers version. Readings (the processor
is whatever AutoProcessor loads: InstructBlipProcessor or Blip2Processor):
1. what InstructBlipProcessor returns for a prompt and one image when asked, as the backend's
   Legacy path (transformers < 5.15) asks, for `return_mm_token_type_ids=True`, and, as its
   Offsets path (>= 5.15) asks, for `return_text_replacement_offsets=True`: the backend locates
   the image's placeholder by one or the other;
2. whether InstructBlipProcessor defines `_get_num_multimodal_tokens`, which the backend asks
   for each image's token count (its image budget, so its engine; from vLLM 0.32.0 its dummy
   image);
3. where the backend's weight mapper (vLLM's own `_create_hf_to_vllm_mapper`, applied to the
   model the backend builds: transformers' AutoModel of the config, InstructBlipModel) sends the
   checkpoint's language-model keys, and whether the built model has that parameter;
4. the HF model's `generate` on a text-only prompt (the decoding checks compare one);
5. the model the backend builds (AutoModel: InstructBlipModel, Blip2Model) on a text-only prompt,
   without pixel_values, as the backend runs it for one.
"""

import os
import sys
import types

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import vllm  # noqa: E402
from PIL import Image  # noqa: E402
from safetensors import safe_open  # noqa: E402
from vllm.model_executor.models.transformers.base import Base  # noqa: E402

path = sys.argv[1]
PROMPT = "What is unusual about this image?"
image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (40, 60, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"


hf = transformers.AutoProcessor.from_pretrained(path)
for option in ("return_mm_token_type_ids", "return_text_replacement_offsets"):
    try:
        out = hf(text=PROMPT, images=[image], **{option: True})
        print(f"1. {type(hf).__name__}(..., {option}=True) returns {sorted(out.keys())}")
    except Exception as error:  # noqa: BLE001 - the exception itself is the result
        print(f"1. {type(hf).__name__}(..., {option}=True) raised {one_line(error)}")

print(f"2. {type(hf).__name__} defines _get_num_multimodal_tokens: "
      f"{hasattr(hf, '_get_num_multimodal_tokens')}")

config = transformers.AutoConfig.from_pretrained(path)
with torch.device("meta"):
    built = transformers.AutoModel.from_config(config)
holder = types.SimpleNamespace(model=built, config=config, quant_config=None,
                               _maybe_apply_model_mapping=lambda: None)
# vLLM 0.34.0's mapper also reads the backend's own _weight_conversions (a method of Base)
holder._weight_conversions = types.MethodType(Base._weight_conversions, holder) \
    if hasattr(Base, "_weight_conversions") else None
try:
    Base._create_hf_to_vllm_mapper(holder)
    names = {name for name, _ in built.named_parameters()}
    with safe_open(os.path.join(path, "model.safetensors"), "pt") as weights:
        # InstructBLIP's Llama: language_model.model.layers.*; BLIP-2's OPT: ...decoder.layers.*
        key = next(k for k in sorted(weights.keys())
                   if k.startswith("language_model.model.") and ".layers." in k)
    mapped = holder.hf_to_vllm_mapper._map_name(key)
    has = mapped is not None and mapped.removeprefix("model.") in names
    print(f"3. the backend builds {type(built).__name__} (language_model: "
          f"{type(built.language_model).__name__}); checkpoint key {key} -> {mapped}; "
          f"the built model has it: {has}")
except Exception as error:  # noqa: BLE001 - this vLLM's mapper needs more of the backend
    print(f"3. the backend builds {type(built).__name__}; its weight mapper, applied alone, "
          f"raised {one_line(error)}")

model = transformers.AutoModelForImageTextToText.from_pretrained(path)
ids = hf.tokenizer(PROMPT, return_tensors="pt")
try:
    out = model.generate(**ids, max_new_tokens=1, do_sample=False)
    print(f"4. the HF model generates text-only: {out[0, -1:].tolist()}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print(f"4. the HF model's generate on a text-only prompt raised {one_line(error)}")

# the backend runs the model it builds (AutoModel of the config) on every prompt, text-only ones
# included, with no pixel_values
base = transformers.AutoModel.from_pretrained(path)
try:
    out = base(**ids)
    print(f"5. {type(base).__name__} runs a text-only prompt: {tuple(out.last_hidden_state.shape)}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print(f"5. {type(base).__name__} on a text-only prompt raised {one_line(error)}")
