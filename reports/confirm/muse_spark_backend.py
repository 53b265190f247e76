"""Can vLLM's Transformers backend serve a Muse Spark checkpoint? (vLLM and transformers only.)

    python muse_spark_backend.py CHECKPOINT

Muse Spark (meta-models/Muse-Spark-Open-816B-A42B) reads images, videos and raw 24 kHz audio;
its processor holds a feature extractor, so vLLM's backend treats the checkpoint as an audio
model too. Readings (one prompt with one 96x64 image):
1. MuseSparkProcessor's own expansion: the ids, the positions mm_token_type_ids marks as image
   and the span its text_replacement_offsets give for the image (the replacement
   <|image_start|> <|patch|>... <|image_end|> of the one <|patch|> the prompt holds);
2. the backend's processing of the same prompt (vLLM's multimodal processor for the model,
   no engine): its placeholder range for the image and which of its positions are embeddings;
3. an engine with model_impl="transformers": what starting it raises (its profiling asks the
   audio config for an input length: max_source_positions, max_position_embeddings or
   max_pos_emb, which MuseSparkAudioConfig does not have).
Exit 1 while 3. fails (reproduces).
"""

import os
import sys

import numpy as np
import transformers
import vllm
from PIL import Image
from transformers import AutoConfig, AutoProcessor

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
PROMPT = ("<|header_start|>user<|header_end|>\n\n<|patch|>What is in this image?<|eot|>"
          "<|header_start|>assistant<|header_end|>\n\n")
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (64, 96, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

processor = AutoProcessor.from_pretrained(path)
config = AutoConfig.from_pretrained(path)
out = processor(text=PROMPT, images=[image], return_mm_token_type_ids=True,
                return_text_replacement_offsets=True)
ids = list(out["input_ids"][0])
marked = [i for i, t in enumerate(out["mm_token_type_ids"][0]) if t == 1]
kinds = sorted({processor.tokenizer.convert_ids_to_tokens(ids[i]) for i in marked})
print(f"1. HF: {len(ids)} ids; mm_token_type_ids marks positions {marked[0]}..{marked[-1]} "
      f"({len(marked)}: {kinds})")
offsets = out.get("text_replacement_offsets")
print(f"   text_replacement_offsets: {offsets}")
toks = processor.tokenizer.convert_ids_to_tokens(ids)
print(f"   tokens around it: {toks[marked[0] - 1]!r} .. {toks[marked[-1] + 1]!r}")

from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

model_config = ModelConfig(model=path, model_impl="transformers", dtype="float32",
                           max_model_len=1024)
print("2. class:", model_config.architecture)
mm_processor = MULTIMODAL_REGISTRY.create_processor(model_config)
result = mm_processor(PROMPT, mm_processor.info.parse_mm_data({"image": [image]}))
token = processor.tokenizer.convert_ids_to_tokens
prompt_ids = result["prompt_token_ids"]
for item in result["mm_placeholders"]["image"]:
    embeds = item.is_embed.tolist() if item.is_embed is not None else None
    first, last = prompt_ids[item.offset], prompt_ids[item.offset + item.length - 1]
    print(f"   backend range: offset {item.offset}, length {item.length}, embeds "
          f"{'all' if embeds is None else sum(embeds)}; tokens {token(first)!r} .. {token(last)!r}")
print("   MuseSparkAudioConfig input-length fields:",
      {n: getattr(config.audio_config, n, None)
       for n in ("max_source_positions", "max_position_embeddings", "max_pos_emb")})

failed = False
llm = None
try:
    llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
                   limit_mm_per_prompt={"image": 1}, enforce_eager=True,
                   kv_cache_memory_bytes=1 << 26)
    print("3. the engine started")
except Exception as error:  # the engine wraps the worker's error; its cause is the message
    cause = error
    while cause.__cause__ is not None:
        cause = cause.__cause__
    first_line = str(cause).splitlines()[0][:300]
    print(f"3. the backend's engine fails: {type(cause).__name__}: {first_line}")
    failed = True
sys.exit(1 if failed else 0)
