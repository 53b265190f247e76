#!/usr/bin/env python3
"""Why vLLM's Transformers backend cannot serve Qianfan-OCR (vLLM and transformers only).

    .venv/bin/conformance exec --transformers 5.17.0 [--vllm 0.34.0] -- .venv/bin/python \
        reports/confirm/qianfan_ocr_unservable.py CHECKPOINT_DIR

CHECKPOINT_DIR: a QianfanOCRForConditionalGeneration checkpoint in the layout of
baidu/Qianfan-OCR, the original InternVL-chat one that transformers' conversion mapping
(`conversion_mapping.py`, "qianfan_ocr") reads and its save_pretrained writes back: the vision
tower's attention fused in `vision_model.encoder.layers.N.attn.qkv` (this project's tiny
fixture, fixtures/recipes/qianfan_ocr.py, is one). Readings:
1. the config vLLM parses (`ModelConfig(model_impl="transformers")`) and the class the backend
   builds from it (`AutoModel.from_config`, meta device, as base.py does);
2. the backend's weight mapper (`Base._create_hf_to_vllm_mapper`, applied to that model): the
   checkpoint keys it maps to a name the built model lacks. transformers splits `attn.qkv` into
   q/k/v with a WeightConverter (Chunk), which the mapper skips ("TODO: Handle WeightConverter"),
   so the vision tower's fused attention has nowhere to go; the backend's load_weights raises
   "There is no module or parameter named ..." on the first such key;
3. control: transformers' own from_pretrained of the same folder (missing / unexpected keys);
4. the backend's processor on one image prompt (what it raises, or the image's range).
"""

import glob
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
from vllm.config import ModelConfig  # noqa: E402
from vllm.model_executor.models.transformers.base import Base  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

PROMPT = "<|im_start|>user\n<image>\nWhat is in it?<|im_end|>\n<|im_start|>assistant\n"


def main(path: str) -> None:
    print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, "
          f"{os.path.basename(path.rstrip('/'))}")
    config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                         limit_mm_per_prompt={"image": 1})
    hf_config = config.hf_config
    with torch.device("meta"):
        built = transformers.AutoModel.from_config(config=hf_config)
    print(f"1. vLLM parses {type(hf_config).__module__}.{type(hf_config).__name__}; the backend "
          f"builds {type(built).__name__}")

    holder = types.SimpleNamespace(model=built, config=hf_config, quant_config=None,
                                   _maybe_apply_model_mapping=lambda: None)
    if hasattr(Base, "_weight_conversions"):  # vLLM 0.34.0's mapper reads it
        holder._weight_conversions = types.MethodType(Base._weight_conversions, holder)
    Base._create_hf_to_vllm_mapper(holder)
    names = {f"model.{name}" for name, _ in built.named_parameters()}
    keys = []
    for file in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
        with safe_open(file, "pt") as weights:
            keys += list(weights.keys())
    unplaced = [(key, holder.hf_to_vllm_mapper._map_name(key)) for key in sorted(keys)]
    unplaced = [(k, m) for k, m in unplaced
                if m is not None and m not in names and not m.startswith("lm_head")]
    print(f"2. backend weight mapper: {len(keys)} checkpoint keys, {len(unplaced)} mapped to a "
          f"name the built model lacks:")
    for key, mapped in unplaced[:4]:
        print(f"     {key} -> {mapped}")
    module = unplaced[0][1].rsplit(".", 2)[0] if unplaced else None
    layer = sorted({n.split('.')[4] for n in names
                    if n.startswith('model.vision_tower.layers.0.')})
    print(f"   the backend's load_weights meets {module!r} first: no such module in the model "
          f"(its layer holds {layer})" if module else "   every key is placed")

    # the backend's load_weights: vLLM's AutoWeightsLoader over a module holding the built model
    # (on the meta device) with the backend's mapper, fed the checkpoint's tensors
    from vllm.model_executor.models.utils import AutoWeightsLoader

    class TransformersMultiModalForCausalLM(torch.nn.Module):  # the name the backend's has
        def __init__(self):
            super().__init__()
            self.model = built

    def tensors():
        for file in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
            with safe_open(file, "pt") as weights:
                for key in weights.keys():  # the backend's own lm_head takes lm_head.*
                    if not (holder.hf_to_vllm_mapper._map_name(key) or "").startswith("lm_head"):
                        yield key, weights.get_tensor(key)

    try:
        AutoWeightsLoader(TransformersMultiModalForCausalLM()) \
            .load_weights(tensors(), mapper=holder.hf_to_vllm_mapper)
        print("   AutoWeightsLoader with the backend's mapper: every key loaded")
    except Exception as error:  # noqa: BLE001 - the error is the reading
        message = " ".join(str(error).split())
        print(f"   AutoWeightsLoader with the backend's mapper raised {type(error).__name__}: "
              f"{message[:150]}")

    model_class = getattr(transformers, hf_config.architectures[0])
    _, info = model_class.from_pretrained(path, output_loading_info=True)
    print(f"3. transformers' {model_class.__name__}.from_pretrained: missing "
          f"{sorted(info['missing_keys'])[:3]}, unexpected {sorted(info['unexpected_keys'])[:3]}")

    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 64, 3),
                                                              dtype=np.uint8))
    try:
        mm = MULTIMODAL_REGISTRY.create_processor(config)
        out = mm(PROMPT, mm.info.parse_mm_data({"image": [image]}))
        (place,) = out["mm_placeholders"]["image"]
        ids = out["prompt_token_ids"][place.offset:place.offset + place.length]
        embeds = "every position" if place.is_embed is None else \
            f"{int(place.is_embed.sum())} of {place.length}"
        print(f"4. backend processor: image range offset={place.offset} length={place.length}, "
              f"embeddings at {embeds}; ids there {sorted(set(ids))}")
    except Exception as error:  # noqa: BLE001 - the error is the reading
        message = " ".join(str(error).split())
        cause = error.__cause__ or error.__context__
        print(f"4. backend processor raised {type(error).__name__}: {message[:150]}"
              f"{' ... ' + message[-80:] if len(message) > 230 else message[150:]}"
              f"{f'; caused by {type(cause).__name__}: {cause}' if cause else ''}")


if __name__ == "__main__":
    main(sys.argv[1])
