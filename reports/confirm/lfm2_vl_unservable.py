"""Can vLLM's Transformers backend serve LFM2-VL? (vLLM and transformers only)

    python lfm2_vl_unservable.py CHECKPOINT [--native]

CHECKPOINT: LiquidAI/LFM2-VL-450M, or this project's tiny one (fixtures/recipes/lfm2_vl.py, not a
registered fixture since the backend cannot serve it), built with
    .venv/bin/python -c "from pathlib import Path; from fixtures.build import write_checkpoint;
    from fixtures.recipes.lfm2_vl import RECIPE, make;
    write_checkpoint(RECIPE, make('tiny'), Path('/tmp/lfm2_vl'))"
(under `conformance exec --transformers V --` for another transformers version).

LFM2's text model is hybrid: its config's layer_types mixes "conv" layers (Lfm2ShortConv, a
gated causal depthwise convolution with its own cache) with "full_attention" layers. The
backend gives every text layer one of vLLM's attention layers, found through the layer's
attention module dispatching through transformers' attention interface. Readings:
1. transformers: the text config's layer_types and the module each layer holds; the HF
   processor's ids and pixel_values rows for one image;
2. vLLM's ModelConfig with model_impl="transformers": the class it resolves; that class built
   as an engine's worker builds it (parameters on the meta device), which runs the backend's
   check of every text layer;
3. the what-if: the same config with every layer "full_attention" built the same way (it
   builds: the conv layers alone stop the backend);
4. with --native, the control: vLLM's native Lfm2VLForConditionalGeneration (model_impl
   "vllm"), one greedy step with the image, its top-5 logprobs against the HF model's.
Exit 1 when the backend refuses the checkpoint (reproduces); 0 when it builds.
"""

import copy
import os
import shutil
import sys
import tempfile
import traceback

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AutoConfig, AutoProcessor, Lfm2VlForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
native = "--native" in sys.argv[2:]
PROMPT = "<|startoftext|><|im_start|>user\n<image>What is in this image?<|im_end|>\n" \
         "<|im_start|>assistant\n"
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def failure(error: BaseException) -> str:
    message = str(error)
    text = f"{type(error).__name__}: " + (repr(message) if len(message) <= 200 else
                                          f"{message[:100]!r} ... {message[-80:]!r}")
    frames = traceback.extract_tb(error.__traceback__)
    return text + (f" at {frames[-1].filename.split('site-packages/')[-1]}:{frames[-1].lineno}"
                   if frames else "")


# 1. transformers (before vLLM's backend decorates transformers' classes)
processor = AutoProcessor.from_pretrained(path)
inputs = processor(text=PROMPT, images=[image], return_tensors="pt")
ids = inputs["input_ids"][0].tolist()
print(f"1. HF processor: {len(ids)} ids, {ids.count(processor.image_token_id)} <image>; "
      f"pixel_values {list(inputs['pixel_values'].shape)} (rows: tiles and thumbnail)")
model = Lfm2VlForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
layers = model.model.language_model.layers
kinds = [type(getattr(layer, "conv", None) or layer.self_attn).__name__ for layer in layers]
print(f"1. text config layer_types {model.config.text_config.layer_types}; the layers' "
      f"modules {kinds}")
with torch.inference_mode():
    hf_logprobs = torch.log_softmax(model(**inputs).logits[0, -1].float(), -1)
del model


def build(folder: str) -> str:
    """The backend's class built as an engine's worker builds it, on the meta device."""
    from vllm.config import (
        DeviceConfig,
        LoadConfig,
        ModelConfig,
        VllmConfig,
        set_current_vllm_config,
    )
    from vllm.distributed import parallel_state
    from vllm.model_executor.model_loader.utils import get_model_architecture

    model_config = ModelConfig(model=folder, model_impl="transformers", dtype="float32",
                               enforce_eager=True, max_model_len=1024)
    model_class, _ = get_model_architecture(model_config)
    vllm_config = VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"),
                             load_config=LoadConfig(load_format="dummy"))
    if not parallel_state.model_parallel_is_initialized():
        with set_current_vllm_config(VllmConfig()):
            if not torch.distributed.is_initialized():
                store = f"file://{tempfile.mkdtemp(prefix='lfm2-dist-')}/store"
                parallel_state.init_distributed_environment(1, 0, store, 0, "gloo")
            parallel_state.initialize_model_parallel(1, 1)
    try:
        with set_current_vllm_config(vllm_config), torch.device("meta"):
            model_class(vllm_config=vllm_config, prefix="")
    except Exception as error:  # noqa: BLE001 - what it raises is the reading
        return f"{model_class.__name__}: {failure(error)}"
    return f"{model_class.__name__}: built"


# 2. the backend's class from the checkpoint as it is
reading = build(path)
print(f"2. backend build: {reading}")
refused = "does not dispatch" in reading

# 3. what-if: every layer an attention layer
config = AutoConfig.from_pretrained(path)
whatif = copy.deepcopy(config)
whatif.text_config.layer_types = ["full_attention"] * whatif.text_config.num_hidden_layers
folder = tempfile.mkdtemp(prefix="lfm2-vl-attention-only-")
shutil.copytree(path, folder, dirs_exist_ok=True)  # the processor's files, the weights
whatif.save_pretrained(folder)
print(f"3. what-if, layer_types {whatif.text_config.layer_types}: backend build: {build(folder)}")

# 4. the control: vLLM's native model serves the checkpoint
if native:
    try:
        llm = vllm.LLM(model=path, model_impl="vllm", dtype="float32", max_model_len=1024,
                       enforce_eager=True, kv_cache_memory_bytes=1 << 26,
                       limit_mm_per_prompt={"image": 1})
        result = llm.generate({"prompt": PROMPT, "multi_modal_data": {"image": [image]}},
                              vllm.SamplingParams(temperature=0.0, max_tokens=1, logprobs=5),
                              use_tqdm=False)[0]
        top = {int(t): float(v.logprob) for t, v in result.outputs[0].logprobs[0].items()}
        gap = max(abs(float(hf_logprobs[t]) - v) for t, v in top.items())
        print(f"4. native engine: served, {len(result.prompt_token_ids)} prompt ids (HF: "
              f"{len(ids)}); largest difference of its top-5 from the HF model's logprobs "
              f"{gap:.3e}")
    except Exception as error:  # noqa: BLE001 - what it raises is the reading
        print(f"4. native engine: {failure(error)}")
sys.exit(1 if refused else 0)

# Measured 2026-12-07, CPU, float32, on this project's tiny LFM2-VL checkpoint
# (fixtures/recipes/lfm2_vl.py; one conv layer, then one attention layer); exit 1 on vLLM 0.31.0
# with transformers 5.17.0 and 5.25.0:
#   1. HF processor: 146 ids, 108 <image>; pixel_values [7, 64, 48] (rows: tiles and thumbnail)
#   1. text config layer_types ['conv', 'full_attention']; the layers' modules
#      ['Lfm2ShortConv', 'Lfm2Attention']
#   2. backend build: TransformersMultiModalForCausalLM: ValueError: 'Layer 0 (conv) does not
#      dispatch through the Transformers attention interface and vLLM has no other way to handle
#      it.' at vllm/model_executor/models/transformers/base.py:608
#   3. what-if, layer_types ['full_attention', 'full_attention']: backend build:
#      TransformersMultiModalForCausalLM: built
#   4. (5.17.0, --native) native engine: RuntimeError: 'causal_conv1d_weight_pack: support only
#      width of 4' at torch/_ops.py:1279 (vLLM's CPU short-conv kernel takes conv_L_cache 4 only;
#      LFM2's is 3: the control is not measured on this CPU)
# vLLM 0.34.0 (its wheel over 0.31.0's environment) is not runnable this way here (building the
# model outside its CPU runner: "vLLM on x86 CPUs requires Triton (triton-cpu)"); the harness's
# run of the fixture (conformance run --fixtures lfm2_vl, unregistered since) shows the same
# ValueError in its encoder, model and generate cells on 0.34.0 with transformers 5.25.0.
