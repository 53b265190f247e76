"""How vLLM's Transformers backend serves GraniteDocling against transformers (vLLM and
transformers only).

    python granite_docling_backend.py CHECKPOINT

GraniteDoclingForConditionalGeneration is unknown to vLLM's registry: only the backend serves
it, so transformers is its reference. Random 40x56 and 40x120 images (float32, CPU), readings:
1. the HF processor on a prompt with both images: the positions its mm_token_type_ids marks,
   the <image> tokens in its ids, and its own per-image counts (`_get_num_multimodal_tokens`);
2. the HF model's get_image_features on those inputs: pixel_values' shape, and how many
   tensors its pooler_output holds for the two images (the backend needs one per image);
3. a text-only prompt, one greedy step: the backend's top-5 logprobs against the HF model's,
   and the ratio of their logit gaps against text_config.logits_scaling;
4. a prompt with the first image alone, one greedy step: the backend against the HF model with
   its logits multiplied back by logits_scaling (what the backend computes), with and without
   its DeepStack features (deepstack_visual_embeds dropped);
5. the prompt with both images through the backend.
Exit 1 when any reading differs from transformers (reproduces).
"""

import os
import sys

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor, GraniteDoclingForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
ROLE = "<|start_of_role|>{}<|end_of_role|>"
PROMPT = ROLE.format("user") + "{}Convert these pages to docling.<|end_of_text|>\n" + \
    ROLE.format("assistant")
rng = np.random.RandomState(0)
images = [Image.fromarray(rng.randint(0, 256, (40, w, 3), dtype=np.uint8)) for w in (56, 120)]
processor = AutoProcessor.from_pretrained(path)
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
reproduced = False

# 1. the HF processor's marks and counts
two = PROMPT.format("<image><image>")
inputs = processor(text=two, images=images, return_tensors="pt", return_mm_token_type_ids=True)
ids = inputs["input_ids"][0].tolist()
marked = int((inputs["mm_token_type_ids"][0] != 0).sum())
image_id = processor.tokenizer.convert_tokens_to_ids("<image>")
counts = processor._get_num_multimodal_tokens(image_sizes=[[40, 56], [40, 120]]
                                               )["num_image_tokens"]
print(f"1. HF processor: mm_token_type_ids marks {marked} positions, the ids hold "
      f"{ids.count(image_id)} <image>; its counts per image {list(counts)} (sum {sum(counts)})")
reproduced |= sum(counts) not in (marked, ids.count(image_id))

# 2. the HF model's image features
model = GraniteDoclingForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
with torch.inference_mode():
    features = model.model.get_image_features(
        inputs["pixel_values"], inputs["pixel_attention_mask"], return_dict=True).pooler_output
print(f"2. pixel_values {tuple(inputs['pixel_values'].shape)}, pixel_attention_mask "
      f"{inputs['pixel_attention_mask'].tolist()}; get_image_features gives "
      f"{len(features)} tensor(s) for 2 images, shapes {[tuple(f.shape) for f in features]}")
reproduced |= len(features) != 2

scaling = model.config.text_config.logits_scaling
text = PROMPT.format("")
one = PROMPT.format("<image>")
one_inputs = processor(text=one, images=images[:1], return_tensors="pt")
with torch.inference_mode():
    text_logits = model(**processor(text=text, return_tensors="pt")).logits[0, -1]
    image_logits = model(**one_inputs).logits[0, -1]
    inner = model.model.text_model
    original = inner.forward

    def without_deepstack(*args, **kwargs):
        kwargs["deepstack_visual_embeds"] = None
        return original(*args, **kwargs)

    inner.forward = without_deepstack
    flat_logits = model(**one_inputs).logits[0, -1]
    inner.forward = original

llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
               limit_mm_per_prompt={"image": 2}, enforce_eager=True,
               kv_cache_memory_bytes=1 << 26)
params = vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5)


def backend_logprobs(request) -> dict[int, float]:
    result = llm.generate(request, params, use_tqdm=False)[0]
    return {int(t): float(v.logprob) for t, v in result.outputs[0].logprobs[0].items()}


def largest(backend: dict[int, float], logits: torch.Tensor) -> float:
    logprobs = torch.log_softmax(logits.float(), -1)
    return max(abs(float(logprobs[t]) - v) for t, v in backend.items())


# 3. text only
backend = backend_logprobs({"prompt": text})
tokens = sorted(backend, key=backend.get, reverse=True)
hf_lp = torch.log_softmax(text_logits.float(), -1)
ratio = (backend[tokens[0]] - backend[tokens[-1]]) / float(hf_lp[tokens[0]] - hf_lp[tokens[-1]])
print(f"3. text only: backend vs HF model {largest(backend, text_logits):.3e}; the backend's "
      f"logit gaps are the HF model's times {ratio:.4f} (logits_scaling {scaling}); vs the HF "
      f"logits times logits_scaling {largest(backend, text_logits * scaling):.3e}")
reproduced |= largest(backend, text_logits) > 1e-4

# 4. one image
try:
    backend = backend_logprobs({"prompt": one, "multi_modal_data": {"image": images[:1]}})
    print(f"4. one image: backend vs the HF model's logits times logits_scaling "
          f"{largest(backend, image_logits * scaling):.3e}; without its DeepStack features "
          f"{largest(backend, flat_logits * scaling):.3e}")
    reproduced |= largest(backend, image_logits * scaling) > 1e-4
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"4. one image: backend {type(error).__name__}: {str(error)[:200]}")
    reproduced = True

# 5. two images
try:
    backend = backend_logprobs({"prompt": two, "multi_modal_data": {"image": images}})
    print(f"5. two images: backend top-5 {backend}")
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"5. two images: backend {type(error).__name__}: {str(error)[:200]}")
    reproduced = True
sys.exit(1 if reproduced else 0)
