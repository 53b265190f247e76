"""How vLLM's Transformers backend serves Emu3 against transformers (vLLM and transformers only).

    python emu3_backend.py CHECKPOINT [--real-geometry]

Emu3ForConditionalGeneration is in vLLM 0.31.0's `_TRANSFORMERS_SUPPORTED_MODELS`: only the
backend serves it, so transformers is its reference. Two random 40x56 images (float32, CPU) in
a prompt written as a user writes it (no BOS: the tokenizer adds none), five readings:
1. the BOS tokens in the HF processor's ids (with the images, text only, and with
   add_special_tokens=False) and in the prompt the backend decodes from;
2. whether the HF model uses the images: its last logits with and without pixel_values, and
   its inner Emu3Model called with them (through the model's own lm_head);
3. one greedy step: the backend's prompt ids against the HF processor's, and its top-5
   logprobs against the HF model's (and its Emu3Model's) on the HF processor's inputs and on
   those ids without their BOS (same pixel values);
4. the image budget the backend reserves (vLLM's `get_mm_max_toks_per_item`) and the HF
   processor's token counts for the images the suites serve (HxW); with --real-geometry also
   Emu3-Chat-hf's geometry (512*512 to 1024*1024 px, 8 px per code), counted by transformers'
   own `smart_resize` as the processor counts;
5. the first image's placeholder: the tokens the HF processor marks as image
   (mm_token_type_ids) and the range the backend's processor gives it;
6. a prompt with two placeholders and one image: what the HF processor raises, and the
   backend.
Exit 1 when any reading differs from transformers, or the backend passes on a bare
StopIteration (reproduces).
"""

import os
import sys

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor, Emu3ForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
PROMPT = "You are a helpful assistant. USER: <image><image>What is in these images? ASSISTANT:"
TEXT = "You are a helpful assistant. USER: What is in this picture? ASSISTANT:"
rng = np.random.RandomState(0)
images = [Image.fromarray(rng.randint(0, 256, (40, 56, 3), dtype=np.uint8)) for _ in range(2)]
processor = AutoProcessor.from_pretrained(path)
bos = processor.tokenizer.bos_token_id
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}; BOS id {bos}")
reproduced = False


def count_bos(ids) -> int:
    return sum(1 for token in list(ids) if token == bos)


# 1. BOS: the HF processor's and the backend's
inputs = processor(text=PROMPT, images=images, return_tensors="pt")
hf_ids = inputs["input_ids"][0].tolist()
unasked = processor(text=PROMPT, images=images, add_special_tokens=False)["input_ids"][0]
print("1. BOS tokens in the HF processor's ids: with the images "
      f"{count_bos(hf_ids)}, text only {count_bos(processor(text=TEXT)['input_ids'][0])}, "
      f"add_special_tokens=False {count_bos(unasked)}; the tokenizer alone "
      f"{count_bos(processor.tokenizer(PROMPT)['input_ids'])}")

# 6. (before any engine) two placeholders, one image: the HF processor's own error
try:
    processor(text="<image><image>", images=images[:1])
    surplus = "accepted"
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    surplus = f"{type(error).__name__}({str(error)[:120]!r})"

# 2. does the HF model use the images?
model = Emu3ForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
with torch.inference_mode():
    logits = model(**inputs).logits[0, -1]
    blind = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]
                  ).logits[0, -1]
    # what the HF model's forward hands its Emu3Model (below 5.16: input_ids alone)
    inner = model.lm_head(model.model(**inputs).last_hidden_state)[0, -1]
ignored = torch.equal(logits, blind)
print(f"2. HF model: last logits with and without pixel_values: max abs diff "
      f"{(logits - blind).abs().max().item():.3e} (images ignored: {ignored}); with and "
      f"through its Emu3Model: {(logits - inner).abs().max().item():.3e}")
reproduced |= ignored

# 3. one greedy step: the HF model first (loading the backend decorates transformers' model
# classes for the whole process), on the HF processor's ids and on them without BOS
stripped = [token for token in hf_ids if token != bos]
with torch.inference_mode():
    unbos = model(input_ids=torch.tensor([stripped]), pixel_values=inputs["pixel_values"],
                  image_sizes=inputs["image_sizes"]).logits[0, -1]
    inner_unbos = model.lm_head(model.model(
        input_ids=torch.tensor([stripped]), pixel_values=inputs["pixel_values"],
        image_sizes=inputs["image_sizes"]).last_hidden_state)[0, -1]
llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
               limit_mm_per_prompt={"image": 2}, enforce_eager=True,
               kv_cache_memory_bytes=1 << 26)
result = llm.generate({"prompt": PROMPT, "multi_modal_data": {"image": images}},
                      vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5),
                      use_tqdm=False)[0]
backend_ids = list(result.prompt_token_ids)
backend = {int(t): float(v.logprob) for t, v in result.outputs[0].logprobs[0].items()}
print(f"3. backend: {len(backend_ids)} prompt ids, {count_bos(backend_ids)} BOS; the HF "
      f"processor's ids: equal {backend_ids == hf_ids}, without their BOS: equal "
      f"{backend_ids == stripped}")
reproduced |= backend_ids != hf_ids


def largest(values: torch.Tensor) -> float:
    logprobs = torch.log_softmax(values.float(), -1)
    return max(abs(float(logprobs[t]) - v) for t, v in backend.items())


on_hf, on_stripped = largest(logits), largest(unbos)
print(f"   backend top-5 logprobs {({t: round(v, 6) for t, v in backend.items()})}")
print(f"   largest difference vs the HF model on the HF processor's inputs {on_hf:.3e}; on "
      f"its ids without BOS {on_stripped:.3e}")
print(f"   its Emu3Model's (images used) on the HF processor's inputs {largest(inner):.3e}; on "
      f"its ids without BOS {largest(inner_unbos):.3e}")
reproduced |= on_hf > 1e-5

# 4. the budget
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402
from vllm.multimodal.encoder_budget import get_mm_max_toks_per_item  # noqa: E402

config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                     limit_mm_per_prompt={"image": 2})
backend_processor = MULTIMODAL_REGISTRY.create_processor(config)
budget = dict(get_mm_max_toks_per_item(backend_processor, {"image": 1}, cache=None))["image"]
SIZES = ((10000, 10000), (400, 400), (400, 51), (51, 400))
served = {f"{h}x{w}": processor._get_num_multimodal_tokens(image_sizes=[[h, w]])
          ["num_image_tokens"][0] for h, w in SIZES}
print(f"4. backend budget per image {budget}; HF processor's tokens per image {served}")
reproduced |= max(served.values()) > budget
if "--real-geometry" in sys.argv:
    from transformers.models.emu3.image_processing_emu3 import smart_resize

    def tokens(height: int, width: int) -> int:
        h, w = smart_resize(height, width, 8, 512 * 512, 1024 * 1024)
        return (h // 8) * (w // 8 + 1)  # a row of codes and its end-of-row token

    real = {f"{h}x{w}": tokens(h, w) for h, w in ((10000, 10000), (4096, 1024), (1024, 4096))}
    print(f"   Emu3-Chat-hf's geometry: tokens per image {real}")

# 5. the first image's placeholder: the tokens the HF processor marks as image, and the
# backend processor's range
marked = processor(text=PROMPT, images=images, return_mm_token_type_ids=True
                   )["mm_token_type_ids"][0]
start = marked.index(1)
length = next((i for i, t in enumerate(marked[start:]) if t != 1), len(marked) - start)
first = backend_processor(PROMPT, backend_processor.info.parse_mm_data({"image": images}),
                          hf_processor_mm_kwargs={}, cache=None)["mm_placeholders"]["image"][0]
embeds = first.length if first.is_embed is None else int(first.is_embed.sum())
print(f"5. first image: the HF processor marks {length} tokens as image, from {start}; the "
      f"backend's range: {first.length} tokens from {first.offset}, {embeds} of them embeddings")
reproduced |= first.length != length

# 6. the surplus placeholder
try:
    llm.generate({"prompt": "<image><image>", "multi_modal_data": {"image": images[:1]}},
                 vllm.SamplingParams(max_tokens=1), use_tqdm=False)
    backend_surplus = "accepted"
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    cause = error.__cause__
    backend_surplus = (f"{type(error).__name__}: ...{str(error)[-60:]!r}" + (
        f" caused by {type(cause).__name__}({str(cause)[:80]!r})" if cause else ""))
print(f"6. two placeholders, one image: HF processor {surplus}; backend {backend_surplus}")
reproduced |= "StopIteration" in backend_surplus
sys.exit(1 if reproduced else 0)

# Measured 2026-12-03, vLLM 0.31.0 (.venv), CPU, on this project's tiny emu3 fixture built for
# each transformers version (BOS id 323; readings 5 and 6 printed 6 then 5 in that run):
# 5.12.1 (Legacy path; 5.14.1 the same but 4.8e-7 in the last line of 3.):
#   1. BOS tokens in the HF processor's ids: with the images 2, text only 0,
#      add_special_tokens=False 2; the tokenizer alone 0
#   2. HF model: last logits with and without pixel_values: max abs diff 0.000e+00 (images
#      ignored: True); with and through its Emu3Model: 2.011e-01
#   3. backend: 98 prompt ids, 2 BOS; the HF processor's ids: equal True, without their BOS:
#      equal False
#      largest difference vs the HF model on the HF processor's inputs 7.684e-02; on its ids
#      without BOS 8.198e-02
#      its Emu3Model's (images used) on the HF processor's inputs 0.000e+00; on its ids
#      without BOS 6.135e-03
#   4. backend budget per image 20; HF processor's tokens per image {'10000x10000': 20,
#      '400x400': 20, '400x51': 22, '51x400': 12}
#   5. first image: the HF processor marks 15 tokens as image, from 35; the backend's range:
#      15 tokens from 35, 15 of them embeddings
#   6. two placeholders, one image: HF processor StopIteration(''); backend ValueError:
#      ...kwargs={..., 'return_tensors': 'pt'}" caused by StopIteration('')   (exit 1)
# 5.15.1: 1. with the images 1, text only 0; 2. images ignored: True; 3. backend: 96 prompt
#   ids, 0 BOS, equal to the HF processor's without their BOS; vs the HF model 1.043e-01, its
#   Emu3Model's on the ids without BOS 0.000e+00; 4. as above; 6. backend accepted   (exit 1)
# 5.17.0 (5.20.2, 5.24.0 and 5.25.0 the same):
#   1. BOS tokens in the HF processor's ids: with the images 1, text only 1,
#      add_special_tokens=False 1; the tokenizer alone 0
#   2. HF model: last logits with and without pixel_values: max abs diff 2.042e-01 (images
#      ignored: False); with and through its Emu3Model: 0.000e+00
#   3. backend: 96 prompt ids, 0 BOS; the HF processor's ids: equal False, without their BOS:
#      equal True
#      backend top-5 logprobs {241: -5.514832, 33: -5.590914, 222: -5.594791, 249: -5.618042,
#      382: -5.639142}
#      largest difference vs the HF model on the HF processor's inputs 6.142e-03; on its ids
#      without BOS 0.000e+00
#   4. backend budget per image 20; HF processor's tokens per image {'10000x10000': 20,
#      '400x400': 20, '400x51': 22, '51x400': 12}
#      Emu3-Chat-hf's geometry (--real-geometry): tokens per image {'10000x10000': 16512,
#      '4096x1024': 16640, '1024x4096': 16448}
#   5. first image: the HF processor marks 15 tokens as image, from 34; the backend's range:
#      22 tokens from 28, 15 of them embeddings
#   6. two placeholders, one image: HF processor StopIteration('') (5.24.0, 5.25.0: ValueError('The
#      total number of <image> tokens in the prompts should be the same as the number of
#      images passed...')); backend accepted   (exit 1)
