"""Can vLLM's Transformers backend serve Ovis2.5 (transformers' Ovis2_5ForConditionalGeneration)?
(vLLM and transformers only)

    .venv/bin/conformance exec --transformers 5.25.0 [--vllm 0.34.0] -- \
        .venv/bin/python reports/confirm/ovis2_5_unservable.py CHECKPOINT

CHECKPOINT: ovis-community/Ovis2.5-2B, or this project's tiny one (fixtures/recipes/ovis2_5.py,
not a registered fixture since the backend cannot serve it), built with
    .venv/bin/conformance exec --transformers 5.25.0 -- .venv/bin/python -c "from pathlib import
    Path; from fixtures.build import write_checkpoint; from fixtures.recipes.ovis2_5 import
    RECIPE, make; write_checkpoint(RECIPE, make('tiny'), Path('/tmp/ovis2_5'))"
Its processor_config.json names processor_class "Ovis2_5Processor", as transformers writes it.
Readings:
1. transformers' own processor (AutoProcessor): its class and the ids of one image's placeholder;
2. the processor vLLM loads for the checkpoint (vllm.transformers_utils.processor.get_processor,
   which the backend's processing info uses): its class and module, whether it defines
   `_get_num_multimodal_tokens` (the backend's image budget, read before an engine starts);
3. the backend's multimodal processor (vLLM's model config with model_impl="transformers") on
   a prompt of transformers' placeholder and one image;
4. where the backend's weight mapper (Base._create_hf_to_vllm_mapper on the model the backend
   builds, AutoModel of the config) sends the checkpoint's `vte.weight` (transformers loads it
   through a WeightConverter that transposes it into the projector's visual_embeddings_table);
5. an engine (model_impl="transformers", float32): one greedy step with the image.
"""

import os
import sys
import types

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import vllm  # noqa: E402
from PIL import Image  # noqa: E402

path = sys.argv[1]
image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 96, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"


hf = transformers.AutoProcessor.from_pretrained(path)
prompt = f"<|im_start|>user\n{hf.image_token}What is this?<|im_end|>\n<|im_start|>assistant\n"
ids = hf(text=prompt, images=[image], return_tensors="pt")["input_ids"][0].tolist()
print(f"1. transformers: {type(hf).__module__}.{type(hf).__name__}; {ids.count(hf.image_token_id)} "
      f"x {hf.image_token} between {hf.image_start_token} and {hf.image_end_token}")

from vllm.transformers_utils.processor import get_processor  # noqa: E402

try:
    loaded = get_processor(path)
    print(f"2. vLLM's get_processor: {type(loaded).__module__}.{type(loaded).__name__}; defines "
          f"_get_num_multimodal_tokens: {hasattr(loaded, '_get_num_multimodal_tokens')}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print(f"2. vLLM's get_processor raised {one_line(error)}")

from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

try:
    config = ModelConfig(model=path, model_impl="transformers", max_model_len=1024,
                         limit_mm_per_prompt={"image": 1})
    processor = MULTIMODAL_REGISTRY.create_processor(config)
    out = processor(prompt, processor.info.parse_mm_data({"image": [image]}), {}, {})
    print(f"3. the backend's processor: image ranges {out['mm_placeholders']}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    cause = error.__cause__ or error
    print(f"3. the backend's processor raised {one_line(error)}; caused by {one_line(cause)}")

from safetensors import safe_open  # noqa: E402
from vllm.model_executor.models.transformers.base import Base  # noqa: E402

config = transformers.AutoConfig.from_pretrained(path)
with torch.device("meta"):
    built = transformers.AutoModel.from_config(config)
holder = types.SimpleNamespace(model=built, config=config, quant_config=None,
                               _maybe_apply_model_mapping=lambda: None)
if hasattr(Base, "_weight_conversions"):  # vLLM 0.34.0's mapper reads it too
    holder._weight_conversions = types.MethodType(Base._weight_conversions, holder)
Base._create_hf_to_vllm_mapper(holder)
names = {f"model.{name}" for name, _ in built.named_parameters()}
with safe_open(os.path.join(path, "model.safetensors"), "pt") as weights:
    keys = [k for k in weights.keys() if k.startswith("vte")]
for key in keys:
    mapped = holder.hf_to_vllm_mapper._map_name(key)
    print(f"4. checkpoint key {key} -> {mapped}; the built {type(built).__name__} has it: "
          f"{mapped in names}")

try:
    llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
                   enforce_eager=True, limit_mm_per_prompt={"image": 1})
    result = llm.generate({"prompt": prompt, "multi_modal_data": {"image": image}},
                          vllm.SamplingParams(max_tokens=1, temperature=0.0))
    print(f"5. the engine served the image: {result[0].outputs[0].token_ids}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print(f"5. the engine raised {one_line(error)}")
