"""Can vLLM's Transformers backend load a Qwen3-VL-MoE checkpoint? (vLLM and transformers only.)

    python qwen3_vl_moe_experts.py CHECKPOINT

Qwen3-VL-MoE checkpoints (Qwen/Qwen3-VL-30B-A3B-Instruct and its siblings) store each layer's
experts as two 3D tensors, gate_up_proj [experts, hidden, 2 x width] and down_proj [experts,
width, hidden]. transformers 5 holds them with the last two dimensions swapped and swaps them
when it loads (a `Transpose` WeightConverter in conversion_mapping.py); vLLM's native
Qwen3-VL-MoE swaps them too (`is_fused_checkpoint_transposed`). The backend maps checkpoint
names through transformers' renamings only (WeightConverters are a TODO in its base.py), so
its fused-MoE layer receives the tensors as stored. Behind that, a second difference: the
hub's text_config names no tie_word_embeddings, so it takes Qwen3VLMoeTextConfig's default
(True), while the top-level config says False; transformers and native vLLM read the top-level
value (an untied lm_head), the backend ties when either says so. Readings, float32 on CPU, one
prompt with one 96x64 image:
1. the class vLLM serves the checkpoint with under model_impl="transformers";
2. the stored expert tensors beside the HF model's parameters; the two tie_word_embeddings; the
   HF model's top-5 logprobs for the next token, native vLLM's, and the HF model's with its
   lm_head tied to the input embeddings;
3. the backend loading the checkpoint as stored;
4. the backend on a copy whose expert tensors are in transformers' own orientation (what
   transformers 5's save_pretrained writes), then on a copy that also says
   text_config.tie_word_embeddings=false: whether its fused-MoE layer runs on CPU and scores as
   the HF model does once both are out of the way (the image prompt then still differs by
   the backend's dropped DeepStack features, finding qwen3-vl-deepstack-dropped; the text
   prompt shows the text model alone).
Exit 1 while 3. fails (reproduces).
"""

import gc
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from safetensors.torch import load_file, save_file
from transformers import AutoProcessor, Qwen3VLMoeForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
TEXT = "What is in this image?<|im_end|>\n<|im_start|>assistant\n"
PROMPT = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>" + TEXT
TEXT_PROMPT = "<|im_start|>user\n" + TEXT  # no image: the text model alone
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (64, 96, 3), dtype=np.uint8))
EXPERTS = ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def top5(logprobs):
    return {int(t): round(float(v), 5) for t, v in logprobs.items()}


def greedy_step(folder, impl, text_too=False):
    """The top-5 logprobs of one greedy step on PROMPT (and on TEXT_PROMPT), or the error
    loading or running raised."""
    llm = None
    prompts = [{"prompt": PROMPT, "multi_modal_data": {"image": [image]}}]
    prompts += [{"prompt": TEXT_PROMPT}] if text_too else []
    try:
        llm = vllm.LLM(model=folder, model_impl=impl, dtype="float32", max_model_len=1024,
                       limit_mm_per_prompt={"image": 1}, enforce_eager=True,
                       kv_cache_memory_bytes=1 << 26)
        outs = llm.generate(prompts, vllm.SamplingParams(temperature=0.0, max_tokens=1,
                                                         logprobs=5), use_tqdm=False)
        found = [{t: v.logprob for t, v in out.outputs[0].logprobs[0].items()} for out in outs]
        return found if text_too else found[0]
    except Exception as error:  # the engine wraps the worker's error; its cause is the message
        cause = error
        while cause.__cause__ is not None:
            cause = cause.__cause__
        return f"{type(cause).__name__}: {str(cause).splitlines()[0]}"
    finally:
        del llm
        gc.collect()


# 1. the served class
from vllm.config import ModelConfig  # noqa: E402

served = ModelConfig(model=path, model_impl="transformers", max_model_len=1024).architecture
print(f"1. model_impl='transformers' serves it with {served}")

# 2. stored vs held, and the references
stored = load_file(os.path.join(path, "model.safetensors"))
model = Qwen3VLMoeForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
held = dict(model.named_parameters())
for suffix in EXPERTS:
    key = next(k for k in stored if k.endswith("layers.0." + suffix))
    mine = next(k for k in held if k.endswith("layers.0." + suffix))
    print(f"2. {key}: stored {list(stored[key].shape)}, the HF model holds "
          f"{list(held[mine].shape)}")
config = model.config
print(f"   tie_word_embeddings: config {config.tie_word_embeddings}, text_config "
      f"{config.text_config.tie_word_embeddings}")
inputs = AutoProcessor.from_pretrained(path)(text=PROMPT, images=[image], return_tensors="pt")


text_only = AutoProcessor.from_pretrained(path)(text=TEXT_PROMPT, return_tensors="pt")


def hf_top5(model, inputs):
    with torch.inference_mode():
        logits = model(**inputs).logits[0, -1].float()
    top = torch.log_softmax(logits, -1).topk(5)
    return dict(zip(top.indices.tolist(), top.values.tolist(), strict=True))


hf, hf_text = hf_top5(model, inputs), hf_top5(model, text_only)
model.lm_head.weight = model.get_input_embeddings().weight
hf_tied = hf_top5(model, inputs)
model = None
gc.collect()
native = greedy_step(path, "vllm")
print(f"   HF model               top-5 logprobs {top5(hf)}")
print(f"   native vLLM            top-5 logprobs "
      f"{native if isinstance(native, str) else top5(native)}")
print(f"   HF model, lm_head tied top-5 logprobs {top5(hf_tied)}")

# 3. the backend on the checkpoint as stored
backend = greedy_step(path, "transformers")
reproduced = isinstance(backend, str)
print(f"3. backend on the checkpoint: {backend if reproduced else top5(backend)}")

# 4. the backend on the same weights in transformers' orientation, then untied as well
def copy_of(folder, untie):
    for name in os.listdir(path):
        if not name.endswith(".safetensors") and os.path.isfile(os.path.join(path, name)):
            shutil.copy(os.path.join(path, name), folder)
    swapped = {k: v.transpose(1, 2).contiguous() if k.endswith(EXPERTS) else v
               for k, v in stored.items()}
    save_file(swapped, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    if untie:
        with open(os.path.join(folder, "config.json")) as f:
            data = json.load(f)
        data["text_config"]["tie_word_embeddings"] = False
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(data, f)
    return folder


def compare(label, found, references):
    print(f"4. backend, {label}: top-5 logprobs {top5(found)}")
    for name, reference in references:
        common = [t for t in reference if t in found]
        worst = max((abs(reference[t] - found[t]) for t in common), default=None)
        print(f"   vs {name}: {len(common)} of 5 tokens in common"
              + (f", largest difference {worst:.2e}" if common else ""))


with tempfile.TemporaryDirectory() as folder:
    turned = greedy_step(copy_of(folder, False), "transformers")
with tempfile.TemporaryDirectory() as folder:
    untied = greedy_step(copy_of(folder, True), "transformers", text_too=True)
if isinstance(turned, str):
    print(f"4. backend, experts in transformers' orientation: {turned}")
else:
    compare("experts in transformers' orientation", turned,
            (("the HF model", hf), ("the HF model with lm_head tied", hf_tied)))
if isinstance(untied, str):
    print(f"4. backend, and text_config.tie_word_embeddings=false: {untied}")
else:
    compare("and text_config.tie_word_embeddings=false", untied[0], (("the HF model", hf),))
    compare("the same, the text prompt", untied[1], (("the HF model", hf_text),))
sys.exit(1 if reproduced else 0)

# Measured 2026-12-03 on this project's tiny qwen3_vl_moe fixture (4 experts of width 16, hidden
# 64), the same output on vLLM 0.31.0 with transformers 5.12.1, 5.17.0 and 5.24.0, and on vLLM
# 0.32.0 with 5.17.0 (exit 1):
#   1. model_impl='transformers' serves it with TransformersMultiModalMoEForCausalLM
#   2. ...layers.0.mlp.experts.gate_up_proj: stored [4, 64, 32], the HF model holds [4, 32, 64]
#      ...layers.0.mlp.experts.down_proj: stored [4, 16, 64], the HF model holds [4, 64, 16]
#      tie_word_embeddings: config False, text_config True
#      HF model and native vLLM: the same top-5 logprobs {27: -5.41288, 242: -5.4166, ...}
#      HF model, lm_head tied: {224: -4.92821, 328: -5.41479, 126: -5.42103, ...}
#   3. backend on the checkpoint: RuntimeError: The size of tensor a (16) must match the size of
#      tensor b (64) at non-singleton dimension 1
#   4. experts in transformers' orientation: {224: -4.92005, 38: -5.43225, 328: -5.44154, ...}:
#      0 of 5 tokens in common with the HF model, 4 with the HF model tied (3.36e-02)
#      and untied: 4 of 5 in common with the HF model, largest difference 2.45e-02 (DeepStack)
#      the same, the text prompt: 5 of 5 in common, largest difference 4.77e-07
