"""How vLLM's Transformers backend serves Ovis2 against transformers (vLLM and transformers only).

    python ovis2_backend.py CHECKPOINT     # an Ovis2ForConditionalGeneration folder

vLLM's registry has no native Ovis2ForConditionalGeneration (only the original Ovis/Ovis2.5
classes): the backend serves it and transformers is its reference. Random 40x56 and 100x30
images (float32, CPU), readings:
1. the HF processor on a prompt with both images: whether it defines `_get_num_multimodal_tokens`
   (and what it counts), pixel_values' rows, whether it returns mm_token_type_ids and how many
   positions they mark, its image_token_id and how many of the ids are <image> / <IMG_ATOM>;
2. the backend's processor (vLLM's multimodal registry, model_impl="transformers") on the same
   prompt: the placeholders it finds, or what it raises;
3. an engine through the backend: what it raises at start, or, where it starts, one greedy step
   on a text-only prompt and on a prompt with the first image: the backend's top-5 logprobs
   against the HF model's, and against the HF model with its indicator tokens (<IMG_START>,
   <IMG_GRID>, <IMG_COL>, <IMG_ROW>, <IMG_END>) left at the text model's embeddings
   (`visual_indicator_token_ids` emptied: no visual_indicator_features written over them).
4. one <image> more than images through the backend's processor: what it raises, and its cause.
Exit 1 when any reading differs from transformers (reproduces).
"""

import os
import sys

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor, Ovis2ForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
PROMPT = "<|im_start|>user\n{}What is in these images?<|im_end|>\n<|im_start|>assistant\n"
rng = np.random.RandomState(0)
images = [Image.fromarray(rng.randint(0, 256, (h, w, 3), dtype=np.uint8))
          for h, w in ((40, 56), (100, 30))]
processor = AutoProcessor.from_pretrained(path)
tokenizer = processor.tokenizer
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
reproduced = False

# 1. the HF processor
two = PROMPT.format("<image><image>")
counter = getattr(processor, "_get_num_multimodal_tokens", None)
counted = counter(image_sizes=[[i.height, i.width] for i in images]) if counter else None
counts = {k: list(counted[k]) for k in ("num_image_tokens", "num_image_patches")} \
    if counter else None
out = processor(text=two, images=images, return_tensors="pt", return_mm_token_type_ids=True)
ids = out["input_ids"][0].tolist()
types = out.get("mm_token_type_ids")
marked = None if types is None else int((types[0] != 0).sum())
image_id = getattr(processor, "image_token_id", None)
atom = tokenizer.convert_tokens_to_ids("<IMG_ATOM>")
print(f"1. HF processor: _get_num_multimodal_tokens "
      f"{'missing' if counter is None else counts}; "
      f"pixel_values {tuple(out['pixel_values'].shape)} for 2 images; mm_token_type_ids "
      f"{'not returned' if types is None else f'mark {marked} positions'}; image_token_id "
      f"{image_id} ({tokenizer.convert_ids_to_tokens(image_id) if image_id is not None else None})"
      f": {ids.count(image_id)} in the ids, {ids.count(atom)} <IMG_ATOM> ({atom})")
reproduced |= counter is None or not marked

# 2. the backend's processor
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

try:
    config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                         limit_mm_per_prompt={"image": 2})
    mm = MULTIMODAL_REGISTRY.create_processor(config)
    got = mm(two, mm.info.parse_mm_data({"image": images}))
    print(f"2. backend processor: image placeholders "
          f"{[(p.offset, p.length) for p in got['mm_placeholders']['image']]}")
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"2. backend processor: {type(error).__name__}: {str(error)[:300]}")
    reproduced = True

# 4. one <image> more than images, through the backend's processor
try:
    got = mm(PROMPT.format("<image><image>"), mm.info.parse_mm_data({"image": images[:1]}))
    print("4. two <image> for one image: the backend accepted it")
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"4. two <image> for one image: the backend raised {type(error).__name__}, caused by "
          f"{error.__cause__!r}")

# 3. the HF model first (once an engine exists, vLLM has wrapped transformers' classes)
model = Ovis2ForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
indicators = list(model.model.visual_indicator_token_ids)


def hf_logprobs(text: str, imgs: list, with_indicators: bool = True) -> torch.Tensor:
    model.model.visual_indicator_token_ids = indicators if with_indicators else []
    inputs = processor(text=text, images=imgs or None, return_tensors="pt")
    with torch.inference_mode():
        logits = model(**inputs).logits[0, -1]
    model.model.visual_indicator_token_ids = indicators
    return torch.log_softmax(logits.float(), -1)


CASES = (("text only", PROMPT.format(""), []),
         ("one image", PROMPT.format("<image>"), images[:1]))
references = {name: (hf_logprobs(text, imgs), hf_logprobs(text, imgs, False))
              for name, text, imgs in CASES}

# 3. an engine through the backend
try:
    llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=2048,
                   limit_mm_per_prompt={"image": 2}, enforce_eager=True,
                   kv_cache_memory_bytes=1 << 26)
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"3. backend engine: {type(error).__name__}: {str(error)[:300]}")
    sys.exit(1)
params = vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5)
for name, text, imgs in CASES:
    request = {"prompt": text, **({"multi_modal_data": {"image": imgs}} if imgs else {})}
    result = llm.generate(request, params, use_tqdm=False)[0]
    backend = {int(t): float(v.logprob) for t, v in result.outputs[0].logprobs[0].items()}
    full, bare = references[name]
    off = max(abs(float(full[t]) - v) for t, v in backend.items())
    off_bare = max(abs(float(bare[t]) - v) for t, v in backend.items())
    print(f"3. {name}: backend top-5 {sorted(backend, key=backend.get, reverse=True)}; vs the HF "
          f"model {off:.3e}; vs the HF model without its indicator embeddings {off_bare:.3e}")
    reproduced |= off > 1e-4
sys.exit(1 if reproduced else 0)
