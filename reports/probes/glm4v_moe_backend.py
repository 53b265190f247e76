"""Does vLLM's Transformers backend serve a GLM-4.5V checkpoint through its MoE class, and as
transformers does? (vLLM and transformers only.)

    .venv/bin/python reports/probes/glm4v_moe_backend.py CHECKPOINT

GLM-4.5V (Glm4vMoeForConditionalGeneration, zai-org/GLM-4.5V) has a GLM-4.5 MoE text model:
the first layer dense, the rest routed experts (text_config.n_routed_experts) with a sigmoid
router, a score-correction bias that only picks the experts (DeepSeek-V3's router, one expert
group) and one shared expert. Its hub checkpoint stores one 2D tensor per expert and projection
(...mlp.experts.E.{gate,up,down}_proj.weight), which transformers 5 merges into its 3D experts
when it loads. Readings, float32 on CPU, one prompt with one 96x64 image and one text prompt:
1. the class vLLM serves the checkpoint with under model_impl="transformers" (the MoE class when
   ModelConfig.is_moe), and the classes of the backend model's experts (vLLM's fused-MoE layer
   where it replaced transformers' experts);
2. the top-5 logprobs of the next token: the HF model's, native vLLM's and the backend's;
3. the HF model's with the routers' score-correction biases zeroed: what a reader that drops
   them would give (the checkpoint's biases change which experts are picked).
Exit 1 when the backend is not served by the MoE class or its top-5 differs from the HF model's.
"""

import gc
import os
import sys

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor, Glm4vMoeForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
TEXT = "What is in this image?<|assistant|>\n"
PROMPT = "[gMASK]<sop><|user|>\n<|begin_of_image|><|image|><|end_of_image|>" + TEXT
TEXT_PROMPT = "[gMASK]<sop><|user|>\n" + TEXT
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (64, 96, 3), dtype=np.uint8))
TOLERANCE = 1e-4
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def top5(logprobs):
    return {int(t): round(float(v), 5) for t, v in logprobs.items()}


def served(impl):
    """The top-5 logprobs of one greedy step on both prompts, and the model's class and fused
    MoE modules, or the error loading or running raised."""
    llm = None
    prompts = [{"prompt": PROMPT, "multi_modal_data": {"image": [image]}},
               {"prompt": TEXT_PROMPT}]
    try:
        llm = vllm.LLM(model=path, model_impl=impl, dtype="float32", max_model_len=1024,
                       limit_mm_per_prompt={"image": 1}, enforce_eager=True,
                       kv_cache_memory_bytes=1 << 26)
        (model,) = llm.apply_model(lambda m: m)
        fused = {name: type(module).__name__ for name, module in model.named_modules()
                 if name.endswith("mlp.experts")}
        outs = llm.generate(prompts, vllm.SamplingParams(temperature=0.0, max_tokens=1,
                                                         logprobs=5), use_tqdm=False)
        found = [{t: v.logprob for t, v in out.outputs[0].logprobs[0].items()} for out in outs]
        return found, type(model).__name__, fused
    except Exception as error:  # the engine wraps the worker's error; its cause is the message
        cause = error
        while cause.__cause__ is not None:
            cause = cause.__cause__
        return f"{type(cause).__name__}: {str(cause).splitlines()[0]}", None, None
    finally:
        del llm
        gc.collect()


def difference(reference, found):
    common = [t for t in reference if t in found]
    worst = max((abs(reference[t] - found[t]) for t in common), default=float("inf"))
    return len(common), worst


# 1. the served class
from vllm.config import ModelConfig  # noqa: E402

config = ModelConfig(model=path, model_impl="transformers", max_model_len=1024)
print(f"1. model_impl='transformers' serves it with {config.architecture} "
      f"(is_moe {config.is_moe}, {config.get_num_experts()} experts)")

# 2. the references
processor = AutoProcessor.from_pretrained(path)
inputs = [processor(text=PROMPT, images=[image], return_tensors="pt"),
          processor(text=TEXT_PROMPT, return_tensors="pt")]
model = Glm4vMoeForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()


def hf_top5():
    found = []
    for batch in inputs:
        with torch.inference_mode():
            logits = model(**batch).logits[0, -1].float()
        top = torch.log_softmax(logits, -1).topk(5)
        found.append(dict(zip(top.indices.tolist(), top.values.tolist(), strict=True)))
    return found


hf = hf_top5()
biases = [b for n, b in model.named_buffers() if n.endswith("e_score_correction_bias")]
print(f"   score-correction biases: {[[round(x, 4) for x in b.tolist()] for b in biases]}")
with torch.no_grad():
    for bias in biases:
        bias.zero_()
hf_unbiased = hf_top5()
model = None
gc.collect()
native, native_cls, _ = served("vllm")
backend, backend_cls, fused = served("transformers")
print(f"   backend model {backend_cls}, its experts {fused}")
failed = "MoE" not in config.architecture or isinstance(backend, str)
for i, label in enumerate(("image prompt", "text prompt")):
    print(f"2. {label}: HF model    top-5 logprobs {top5(hf[i])}")
    for name, found in (("native vLLM", native), ("backend", backend)):
        if isinstance(found, str):
            print(f"   {label}: {name}: {found}")
            continue
        common, worst = difference(hf[i], found[i])
        print(f"   {label}: {name}: {common} of 5 tokens in common with the HF model, "
              f"largest difference {worst:.2e}")
        failed |= name == "backend" and (common < 5 or worst > TOLERANCE)
    common, worst = difference(hf[i], hf_unbiased[i])
    print(f"3. {label}: HF model, biases zeroed: top-5 {top5(hf_unbiased[i])}: {common} of 5 "
          f"tokens in common, largest difference {worst:.2e}")
sys.exit(1 if failed else 0)

# Measured 2026-12-03 on this project's tiny glm4v_moe fixture (2 text layers, the second with
# 4 routed experts of width 16, 2 per token, and a shared expert; hidden 64), vLLM 0.31.0 with
# transformers 5.12.1, 5.17.0 and 5.25.0 (exit 0 on each; the same logprobs on each):
#   1. model_impl='transformers' serves it with TransformersMultiModalMoEForCausalLM (is_moe
#      True, 4 experts); its experts: vLLM's MoERunner (gate, experts and shared expert fused,
#      vLLM routes) on 5.17.0 and 5.25.0, TransformersMoERunner (transformers routes) on 5.12.1
#   2. image prompt: HF {151: -5.31917, 169: -5.45773, 259: -5.46043, 108: -5.46142, ...};
#      backend 5 of 5 in common, largest difference 0.00e+00; native vLLM the same on 5.12.1
#      and 5.17.0, on 5.25.0 'ValueError: Found 300 <|video|> tokens in the text but no videos
#      were passed.' (native's dummy video through 5.25.0's processor, as for glm4v)
#      text prompt: HF {151: -5.32432, 259: -5.45444, ...}; backend 0.00e+00
#   3. biases zeroed: the HF model's logprobs move by 4.95e-03 (image) and 4.45e-03 (text)
