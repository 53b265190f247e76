#!/usr/bin/env python3
"""Confirms gemma4's findings with vLLM and transformers only, on a Gemma4 checkpoint with an
image and an audio tower (the fixture built by fixtures/, or google/gemma-4-E2B-it), or on a
Gemma 4 Unified one (no towers: patches and waveform frames projected straight into the text
model; the gemma4_unified fixture, mirroring google/gemma-4-12B-it), where the same readings
meet Gemma4UnifiedProcessor and Gemma4UnifiedConfig (its output:
reports/confirm/gemma4_unified_backend.txt):

1. gemma4-native-chat-template-no-bos: one prompt holding an image and an audio placeholder,
   processed by native vLLM's Gemma4 processor and by the Transformers backend's. Native vLLM
   tokenizes a text prompt without special tokens where the tokenizer has a chat template
   (Gemma4ProcessingInfo.get_default_tok_params); the backend keeps the default and opens the
   prompt with the tokenizer's BOS. Also prints what each modality's fields are in the mixed
   prompt (the backend attributes each processor output to its modality).
2. gemma4-backend-audio-max-length: the backend cannot start an engine, as its
   get_mm_max_tokens_per_item reads the audio tower's input length from
   max_source_positions / max_position_embeddings / max_pos_emb, none of which
   Gemma4AudioConfig has; native vLLM starts.
3. gemma4-legacy-image-rows (transformers < 5.15): Gemma4Model.get_image_features returns one
   tensor of every image's soft tokens; the backend splits it by the processor's
   num_image_patches (one row of pixel data per image) and each image gets 1 row. Shown with the
   backend's own processor outputs and its `_split_embeddings`.
4. The Legacy path's ranges (gemma4-legacy-soft-token-ranges) print in reading 1; a prompt
   with two audio placeholders and one audio (legacy-surplus-placeholder-unexplained) here.
5. Why the Legacy ranges leave the markers out, whatever an item's size: Gemma4Processor keeps
   ProcessorMixin's image_token_ids / audio_token_ids (the soft token alone), so the
   mm_token_type_ids the backend's _apply_vision reads mark only <|image|>, and the runs its
   _apply_audio searches for (_get_mm_token_ids) are of <|audio|> alone: the <|image> <image|>
   and <|audio> <audio|> markers of each replacement lie outside (three image sizes and three
   audio lengths; on >= 5.15 the backend takes its ranges from the replacement offsets).

    .venv/bin/conformance exec --transformers 5.17.0 -- \
        .venv/bin/python reports/confirm/gemma4_backend.py GEMMA4_CHECKPOINT_DIR
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

# Output (the fixture built by fixtures/, 2026-12-03; "..." cuts nothing but log lines):
OUTPUT = """
transformers 5.12.1 prompt '<|turn>user\\n<|image|><|audio|>What?<turn|>\\n'
bos <bos> 2 chat template True
vllm add_special_tokens False ids [5, 95, 93, 273, 209, 7] length 102
vllm placeholders {'image': [(5, 65)], 'audio': [(70, 27)]} fields {'image':
    ['pixel_position_ids', 'pixel_values'], 'audio': ['input_features_mask',
    'input_features_padded']}
transformers add_special_tokens True ids [2, 5, 95, 93, 273, 209] length 103
transformers placeholders {'audio': [(72, 25)], 'image': [(7, 63)]} fields {'audio':
    ['input_features', 'input_features_mask', 'num_audio_tokens'], 'image': ['image_position_ids',
    'num_image_patches', 'pixel_values']}
image features Tensor (128, 64) num_image_patches [1, 1] embeds per placeholder [63, 65]
backend split [(64, 64), (64, 64)]
transformers raised ValueError cause StopIteration() | ends with: "_tokens': False,
    'return_tensors': 'pt'}"
vllm engine started
transformers engine failed ValueError Unable to get max input length from Gemma4AudioConfig. The
    following attribute names were checked: ('max_source_positions', 'max_position_embeddings',
    'max_pos_emb').
"""
# 5.14.1: the same. 5.15.1, 5.17.0, 5.25.0: readings 1 and 2 the same but the backend's
# placeholders image (6, 65), audio (71, 27) (one BOS after native's); 'image features tuple
# [63, 65]' (no split); 'transformers accepted two audio placeholders for one audio'. (On 5.15.1
# native's engine failed once for want of free memory while another job ran; 5.17.0 and 5.25.0
# show 'vllm engine started'.)
# Reading 5 (2026-12-04, the fixture built by fixtures/ at the time, the engines with
# gpu_memory_utilization=0.5; vLLM 0.31.0):
OUTPUT_5 = """
transformers 5.12.1
image_token_ids [331] audio_token_ids [332] markers {'boi_token': 7, 'eoi_token': 8,
    'boa_token': 9, 'eoa_token': 10}
image 16x16 audio 0.1s: mm_token_type_ids marks {1: [331], 3: [332]}; backend ranges
    {'audio': [(73, 3)], 'image': [(7, 64)]} hold ids {'audio': [332], 'image': [331]}
image 48x64 audio 1.0s: mm_token_type_ids marks {1: [331], 3: [332]}; backend ranges
    {'audio': [(72, 25)], 'image': [(7, 63)]} hold ids {'audio': [332], 'image': [331]}
image 400x50 audio 3.0s: mm_token_type_ids marks {1: [331], 3: [332]}; backend ranges
    {'audio': [(55, 75)], 'image': [(7, 46)]} hold ids {'audio': [332], 'image': [331]}
transformers engine failed ValueError Unable to get max input length from Gemma4AudioConfig. ...
transformers 5.17.0 (Offsets path: the backend's ranges are the replacements, markers included)
image_token_ids [331] audio_token_ids [332] markers {'boi_token': 7, 'eoi_token': 8,
    'boa_token': 9, 'eoa_token': 10}
image 16x16 audio 0.1s: mm_token_type_ids marks {1: [331], 3: [332]}; backend ranges
    {'audio': [(72, 5)], 'image': [(6, 66)]} hold ids {'audio': [9, 10, 332], 'image': [7, 8, 331]}
image 48x64 audio 1.0s: mm_token_type_ids marks {1: [331], 3: [332]}; backend ranges
    {'audio': [(71, 27)], 'image': [(6, 65)]} hold ids {'audio': [9, 10, 332], 'image': [7, 8, 331]}
image 400x50 audio 3.0s: mm_token_type_ids marks {1: [331], 3: [332]}; backend ranges
    {'audio': [(54, 77)], 'image': [(6, 48)]} hold ids {'audio': [9, 10, 332], 'image': [7, 8, 331]}
vllm engine started
transformers engine failed ValueError Unable to get max input length from Gemma4AudioConfig. ...
"""
# Readings 1 to 4 on 5.12.1 and 5.17.0 as in OUTPUT above. On 5.12.1 this run's native engine did
# not start for want of free memory beside other jobs (the default gpu_memory_utilization then;
# 0.5 since); the 2026-12-03 run above shows 'vllm engine started' there.
