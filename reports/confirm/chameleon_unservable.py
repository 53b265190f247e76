"""Can vLLM's Transformers backend serve Chameleon's images? (vLLM and transformers only)

    python chameleon_unservable.py CHECKPOINT

CHECKPOINT: facebook/chameleon-7b, or this project's tiny one (fixtures/recipes/chameleon.py,
not a registered fixture since the backend cannot serve it), built with
    .venv/bin/python -c "from pathlib import Path; from fixtures.build import write_checkpoint;
    from fixtures.recipes.chameleon import RECIPE, make;
    write_checkpoint(RECIPE, make('tiny'), Path('/tmp/chameleon'))"
(under `conformance exec --transformers V --` for another transformers version).

ChameleonForConditionalGeneration has no native model in vLLM 0.31.0 (its registry lists it
among the previously supported architectures, native until 0.28.0), so vLLM falls back to the
Transformers backend. Which backend class it picks depends on the config alone
(`ModelConfig._get_transformers_backend_cls`): the multimodal class only when the config nests
a text config (`hf_config is not hf_text_config`). ChameleonConfig is flat (the text model's
sizes at its top level, the VQ-VAE's in `vq_config`), so vLLM picks the text-only
TransformersForCausalLM. Four readings:
1. transformers: whether ChameleonConfig nests a text config, and whether the HF model uses
   the image (its last logits with and without pixel_values);
2. vLLM's model config: the architecture it resolves, and whether it is multimodal;
3. vLLM's multimodal registry: the backend's processor for the checkpoint;
4. an engine (model_impl="transformers", float32, CPU or GPU): a prompt with an image.
Exit 1 when vLLM cannot serve the image (reproduces).
"""

import os
import sys

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AutoConfig, AutoProcessor, ChameleonForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
PROMPT = "What do you see in this image? <image>"
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

# 1. transformers
config = AutoConfig.from_pretrained(path)
processor = AutoProcessor.from_pretrained(path)
inputs = processor(text=PROMPT, images=[image], return_tensors="pt")
model = ChameleonForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
with torch.inference_mode():
    seen = model(**inputs).logits[0, -1]
    blind = model(input_ids=inputs["input_ids"]).logits[0, -1]
print(f"1. {type(config).__name__}: nests a text config: {config.get_text_config() is not config}"
      f"; HF model's last logits with and without pixel_values: max abs diff "
      f"{(seen - blind).abs().max().item():.3e}")
del model

# 2. vLLM's model config
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

model_config = ModelConfig(model=path, model_impl="transformers", max_model_len=1024)
print(f"2. vLLM resolves {model_config.architecture}; multimodal: "
      f"{model_config.is_multimodal_model}; hf_config is hf_text_config: "
      f"{model_config.hf_config is model_config.hf_text_config}")
reproduced = not model_config.is_multimodal_model

# 3. the backend's processor
try:
    MULTIMODAL_REGISTRY.create_processor(model_config)
    made = "made"
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    made = f"{type(error).__name__}: {str(error)[-60:]!r}"
print(f"3. the multimodal registry's processor: {made}")

# 4. an engine, one prompt with the image
llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
               enforce_eager=True, kv_cache_memory_bytes=1 << 26)
try:
    out = llm.generate({"prompt": PROMPT, "multi_modal_data": {"image": [image]}},
                       vllm.SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)[0]
    served = f"served: {len(out.prompt_token_ids)} prompt ids"
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    served = f"{type(error).__name__}: {str(error)[:160]!r}"
    reproduced = True
print(f"4. engine ({type(llm.llm_engine).__name__}), a prompt with one image: {served}")
sys.exit(1 if reproduced else 0)

# Measured 2026-12-04, vLLM 0.31.0 (.venv), CPU, on this project's tiny Chameleon checkpoint
# (fixtures/recipes/chameleon.py) built for each transformers version; the same on 5.12.1,
# 5.14.1, 5.15.1, 5.17.0, 5.20.2 and 5.25.0 (exit 1 on each):
#   1. ChameleonConfig: nests a text config: False; HF model's last logits with and without
#      pixel_values: max abs diff 2.564e-01
#   2. vLLM resolves TransformersForCausalLM; multimodal: False; hf_config is hf_text_config: True
#   3. the multimodal registry's processor: ValueError: '...chameleon-tiny-tf5.17.0-27c026bfc038
#      is not a multimodal model'
#   4. engine (LLMEngine), a prompt with one image: ValueError: 'Multi-modal processor not
#      available for text-only models'
# vLLM 0.33.0's wheel over .venv (no CPU build: readings 1 to 3 only, the engine cut off),
# transformers 5.17.0 and 5.20.2: readings 1 to 3 the same.
