#!/usr/bin/env python3
"""Confirms gemma4's findings on a Gemma 4 Unified checkpoint (no vision or audio tower: patches
and waveform frames projected straight into the text model; the gemma4_unified fixture built by
fixtures/, mirroring google/gemma-4-12B-it), with vLLM and transformers only. The readings of
reports/confirm/gemma4_backend.py, on Gemma4UnifiedProcessor and Gemma4UnifiedConfig:

1. gemma4-native-chat-template-no-bos: native vLLM (Gemma4UnifiedForConditionalGeneration)
   tokenizes a text prompt without the BOS the backend adds; each one's placeholders.
2. gemma4-backend-audio-max-length: the backend cannot start an engine, as
   Gemma4UnifiedAudioConfig names none of max_source_positions / max_position_embeddings /
   max_pos_emb; native vLLM starts.
3. gemma4-legacy-image-rows (transformers < 5.15): get_image_features returns one tensor of every
   image's soft tokens, which the backend splits by num_image_patches (1 per image).
4. legacy-surplus-placeholder-unexplained (< 5.15): two audio placeholders for one audio.
5. gemma4-legacy-soft-token-ranges (< 5.15): the mm_token_type_ids the Legacy path reads mark the
   soft tokens alone, not the <|image> <image|> / <|audio> <audio|> markers.

    .venv/bin/conformance exec --transformers 5.14.1 -- \
        .venv/bin/python /ABS/reports/confirm/gemma4_unified_backend.py GEMMA4_UNIFIED_DIR
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import transformers  # noqa: E402
from PIL import Image  # noqa: E402
from vllm import LLM  # noqa: E402
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

path = sys.argv[1]
processor = transformers.AutoProcessor.from_pretrained(path)
tokenizer = processor.tokenizer
prompt = f"<|turn>user\n{processor.image_token}{processor.audio_token}What?<turn|>\n"
image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (48, 64, 3), dtype=np.uint8))
audio = (np.random.default_rng(1).standard_normal(16000).astype(np.float32) * 0.1, 16000)
print("transformers", transformers.__version__, "prompt", repr(prompt))
print("bos", tokenizer.bos_token, tokenizer.bos_token_id, "chat template",
      tokenizer.chat_template is not None)

# 1. one prompt, one image and one audio item, through each implementation's processor
for impl in ("vllm", "transformers"):
    config = ModelConfig(model=path, model_impl=impl, max_model_len=4096,
                         limit_mm_per_prompt={"audio": 1, "image": 1})
    mm = MULTIMODAL_REGISTRY.create_processor(config)
    params = mm.info.get_default_tok_params()
    out = mm(prompt, mm.info.parse_mm_data({"image": [image], "audio": [audio]}))
    ids = out["prompt_token_ids"]
    placed = {m: [(p.offset, p.length) for p in ps] for m, ps in out["mm_placeholders"].items()}
    fields = {m: sorted(item.keys()) for m, items in out["mm_kwargs"].items() for item in items}
    print(impl, "add_special_tokens", getattr(params, "add_special_tokens", params),
          "ids", ids[:6], "length", len(ids))
    print(impl, "placeholders", placed, "fields", fields)

# 3. the image rows each image gets from the backend's split of the encoder output
import torch  # noqa: E402
from vllm.model_executor.models.transformers.multimodal import (  # noqa: E402
    MultiModalMixin,
)

config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                     limit_mm_per_prompt={"audio": 1, "image": 2})
mm = MULTIMODAL_REGISTRY.create_processor(config)
image2 = Image.fromarray(np.random.default_rng(2).integers(0, 255, (40, 100, 3), dtype=np.uint8))
token = processor.image_token
out = mm(f"{token}{token}", mm.info.parse_mm_data({"image": [image, image2]}))
items = out["mm_kwargs"]["image"]
hf = processor(text=f"{token}{token}", images=[image, image2], return_tensors="pt")
pixel_values, position_ids = hf["pixel_values"], hf["image_position_ids"]
split = [int(item["num_image_patches"].data) for item in items]
model = transformers.AutoModel.from_pretrained(path).eval()
with torch.no_grad():
    features = model.get_image_features(pixel_values, image_position_ids=position_ids)
pooled = features.pooler_output
hf_rows = [p.shape[0] for p in pooled] if isinstance(pooled, (tuple, list)) else None
print("image features", type(pooled).__name__,
      tuple(pooled.shape) if isinstance(pooled, torch.Tensor) else hf_rows,
      "num_image_patches", split, "embeds per placeholder",
      [p.get_num_embeds() for p in out["mm_placeholders"]["image"]])
if isinstance(pooled, torch.Tensor):
    rows = MultiModalMixin._split_embeddings(None, pooled, split)
    print("backend split", [tuple(r.shape) for r in rows])

# 4. one audio placeholder more than audios
try:
    mm(f"{processor.audio_token}{processor.audio_token}", mm.info.parse_mm_data(
        {"audio": [audio]}))
    print("transformers accepted two audio placeholders for one audio")
except Exception as error:  # noqa: BLE001 - what the backend does is the result
    print("transformers raised", type(error).__name__, "cause", repr(error.__cause__),
          "| ends with:", repr(str(error)[-40:]))

# 5. what the Legacy path reads its ranges from, for items of several sizes
markers = {name: tokenizer.convert_tokens_to_ids(getattr(processor, name)) for name in
           ("boi_token", "eoi_token", "boa_token", "eoa_token")}
print("image_token_ids", getattr(processor, "image_token_ids", None), "audio_token_ids",
      getattr(processor, "audio_token_ids", None), "markers", markers)
for (h, w), seconds in (((16, 16), 0.1), ((48, 64), 1.0), ((400, 50), 3.0)):
    sized = Image.fromarray(np.random.default_rng(3).integers(0, 255, (h, w, 3), dtype=np.uint8))
    sound = np.random.default_rng(4).standard_normal(int(16000 * seconds)).astype(np.float32)
    hf = processor(text=prompt, images=[sized], audio=[sound], return_mm_token_type_ids=True,
                   return_tensors="pt")
    ids, types = hf["input_ids"][0], hf["mm_token_type_ids"][0]
    marked = {int(t): sorted(set(ids[types == t].tolist())) for t in types.unique() if t}
    out = mm(prompt, mm.info.parse_mm_data({"image": [sized], "audio": [(sound, 16000)]}))
    held = {m: sorted({out["prompt_token_ids"][q] for p in ps
                       for q in range(p.offset, p.offset + p.length)})
            for m, ps in out["mm_placeholders"].items()}
    print(f"image {h}x{w} audio {seconds}s: mm_token_type_ids marks {marked}; backend ranges "
          f"{ {m: [(p.offset, p.length) for p in ps] for m, ps in out['mm_placeholders'].items()} }"
          f" hold ids {held}")

# 2. an engine on each implementation
for impl in ("vllm", "transformers"):
    try:
        # on CPU the fraction of the machine's memory the engine reserves: the default (0.92)
        # fails to start beside any other process
        llm = LLM(model=path, model_impl=impl, max_model_len=2048, enforce_eager=True,
                  limit_mm_per_prompt={"audio": 1, "image": 1}, max_num_seqs=1,
                  gpu_memory_utilization=0.5)
        print(impl, "engine started")
        del llm
    except Exception as error:  # noqa: BLE001 - what each implementation does is the result
        print(impl, "engine failed", type(error).__name__, str(error)[:300])

