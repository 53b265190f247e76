"""How vLLM's Transformers backend serves Apertus 1.5 against transformers (vLLM and transformers
only).

    python apertus1p5_backend.py CHECKPOINT

Apertus1p5ForConditionalGeneration is unknown to vLLM's registry: only the backend serves it,
so transformers is its reference. Three readings:
1. the backend's encoder budget (vLLM's `get_mm_max_toks_per_item`, which every engine start
   asks before profiling), for one image and one audio;
2. the weights the backend would load: the WeightsMapper the backend builds
   (`_create_hf_to_vllm_mapper`, run on transformers' Apertus1p5Model as the backend builds
   it, on the meta device) applied to the checkpoint's keys: how many it drops, by module, and
   the `_keys_to_ignore_on_load_unexpected` it turns into drops;
3. one image (40x56 px) and one audio (2400 samples at 24 kHz): the tokens the HF processor
   marks as each item (mm_token_type_ids) and the range the backend's processor gives it.
Exit 1 when any reading differs from transformers (reproduces).
"""

import json
import os
import sys
from collections import Counter
from pathlib import Path
from types import MethodType, SimpleNamespace

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from safetensors import safe_open
from transformers import AutoConfig, AutoModel, AutoProcessor

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
reproduced = False
processor = AutoProcessor.from_pretrained(path)

from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402
from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item  # noqa: E402

config = ModelConfig(model=path, model_impl="transformers", max_model_len=1024,
                     limit_mm_per_prompt={"image": 1, "audio": 1})
print(f"architecture resolved: {config.architecture}")
backend_processor = MULTIMODAL_REGISTRY.create_processor(config)

# 1. the budget
try:
    budget = dict(get_mm_max_toks_per_item(backend_processor, {"image": 1, "audio": 1},
                                           cache=None))
    print(f"1. backend budget per item: {budget}")
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"1. backend budget: {type(error).__name__}: {error}")
    reproduced = True

# 2. the weights the backend's mapper keeps
from vllm.model_executor.models.transformers.base import Base  # noqa: E402

hf_config = AutoConfig.from_pretrained(path)
with torch.device("meta"):
    inner = AutoModel.from_config(hf_config)
stub = SimpleNamespace(model=inner, config=hf_config, _maybe_apply_model_mapping=lambda: None)
if hasattr(Base, "_weight_conversions"):
    stub._weight_conversions = MethodType(Base._weight_conversions, stub)
Base._create_hf_to_vllm_mapper(stub)
index = Path(path, "model.safetensors")
with safe_open(index, "pt") as handle:
    keys = list(handle.keys())
dropped = Counter(".".join(key.split(".")[:2]) for key in keys
                  if stub.hf_to_vllm_mapper._map_name(key) is None)
print(f"2. {type(inner).__name__}._keys_to_ignore_on_load_unexpected: "
      f"{sorted(inner._keys_to_ignore_on_load_unexpected or [])}")
print(f"   the backend's mapper drops {sum(dropped.values())} of {len(keys)} checkpoint keys: "
      f"{json.dumps(dict(sorted(dropped.items())))}")
reproduced |= bool(dropped)

# 3. the placeholders
rng = np.random.RandomState(0)
image = Image.fromarray(rng.randint(0, 256, (40, 56, 3), dtype=np.uint8))
audio = rng.uniform(-0.5, 0.5, 2400).astype(np.float32)
for modality, token, item in (("image", processor.image_token, image),
                              ("audio", processor.audio_token, audio)):
    prompt = f"user: {token}What is in this?\nassistant:"
    kwargs = {"images": [image]} if modality == "image" else {"audio": [audio]}
    marked = processor(text=prompt, return_mm_token_type_ids=True, **kwargs
                       )["mm_token_type_ids"][0]
    marked = list(marked)
    # the item's marked tokens, first to last (an image's end-of-row tokens are not marked)
    start = next(i for i, t in enumerate(marked) if t != 0)
    length = max(i for i, t in enumerate(marked) if t != 0) + 1 - start
    count = sum(1 for t in marked if t != 0)
    data = backend_processor.info.parse_mm_data({modality: [item]})
    first = backend_processor(prompt, data, hf_processor_mm_kwargs={}, cache=None
                              )["mm_placeholders"][modality][0]
    embeds = first.length if first.is_embed is None else int(first.is_embed.sum())
    ids = processor(text=prompt, **kwargs)["input_ids"][0]
    ids = list(ids)
    around = processor.tokenizer.convert_ids_to_tokens(ids[first.offset:start])
    after = processor.tokenizer.convert_ids_to_tokens(
        ids[start + length:first.offset + first.length])
    print(f"3. {modality}: the HF processor marks {count} tokens, from {start} to "
          f"{start + length - 1}; the backend's "
          f"range: {first.length} tokens from {first.offset}, {embeds} of them embeddings "
          f"(before the marked ones: {around}; after: {after})")
    reproduced |= (first.offset, first.length) != (start, length)
sys.exit(1 if reproduced else 0)
