"""vLLM's Transformers backend on a Cohere Compass checkpoint whose NoPE layers have no rope
parameters (vLLM and transformers only).

    python cohere_compass_backend.py CHECKPOINT

CohereLabs/North-Micro-Vision-Instruct's text config gives rope_parameters per layer type, with
None for the full-attention (NoPE) layers (CohereCompassTextConfig.convert_rope_params_to_dict
keeps them). Readings:
1. the text config's rope_parameters as transformers loads them, and the architecture vLLM
   resolves with model_impl="transformers";
2. the backend's torch.compile gate (`can_enable_torch_compile`, the `enable_if` of the
   backend's `@support_torch_compile`, called as vLLM calls it when it builds the backend's
   model class) on that config: its answer, or what it raises and where;
3. the logits scale the backend gives its LogitsProcessor (causal.py:
   `getattr(text_config, "logit_scale", 1.0)`; CohereCompassTextConfig's logit_scale defaults
   to None, which transformers' model reads as no scaling) and vLLM's LogitsProcessor built with
   it, applied to a row of logits.
Exit 1 when the gate or the logits processor raises (reproduces).
"""

import sys
import traceback
from types import SimpleNamespace

import transformers
import vllm
from transformers import AutoConfig
from vllm.config import ModelConfig
from vllm.model_executor.models.transformers.utils import can_enable_torch_compile

path = sys.argv[1]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
config = AutoConfig.from_pretrained(path)
print(f"1. text_config.rope_parameters: {config.get_text_config().rope_parameters}")
model_config = ModelConfig(model=path, model_impl="transformers", max_model_len=1024)
print(f"   architecture resolved: {model_config.architecture}")
reproduced = False


def raised(error: Exception) -> str:
    frame = traceback.extract_tb(error.__traceback__)[-1]
    name = frame.filename.split("site-packages/")[-1].split("+torch2.13.0/")[-1]
    where = f"{name}:{frame.lineno}"
    return f"{type(error).__name__}: {error} at {where} ({frame.line})"


try:
    enabled = can_enable_torch_compile(SimpleNamespace(model_config=model_config))
    print(f"2. can_enable_torch_compile: {enabled}")
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"2. can_enable_torch_compile: {raised(error)}")
    reproduced = True

import torch  # noqa: E402
from vllm.model_executor.layers.logits_processor import LogitsProcessor  # noqa: E402

text_config = config.get_text_config()
scale = getattr(text_config, "logit_scale", 1.0)
try:
    from vllm.config import VllmConfig, set_current_vllm_config

    try:
        with set_current_vllm_config(VllmConfig(model_config=model_config)):
            processor = LogitsProcessor(text_config.vocab_size, scale=scale,
                                        logits_as_input=True)
    except RuntimeError:  # 0.34.0 on x86 without Triton builds no VllmConfig outside its runner
        processor = LogitsProcessor.__new__(LogitsProcessor)  # its forward, as __init__ sets it
        torch.nn.Module.__init__(processor)
        processor.scale, processor.soft_cap, processor.logits_as_input = scale, None, True
    logits = processor(None, torch.zeros(1, text_config.vocab_size))
    print(f"3. text_config.logit_scale {text_config.logit_scale!r}; the backend's scale "
          f"{scale!r}: logits {tuple(logits.shape)}")
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    print(f"3. text_config.logit_scale {text_config.logit_scale!r}; the backend's scale "
          f"{scale!r}: LogitsProcessor {raised(error)}")
    reproduced = True
sys.exit(1 if reproduced else 0)
