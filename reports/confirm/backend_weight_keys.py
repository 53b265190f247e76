"""Where vLLM's Transformers backend sends a checkpoint's weight names, with vLLM and transformers
only: for each key of the checkpoint's safetensors, the name the backend's own weight mapper
(`Base._create_hf_to_vllm_mapper`, applied to the model the backend builds: transformers'
AutoModel of the config, on the meta device) gives it, and whether the built model has that
parameter; then how transformers itself loads the same folder (its missing and unexpected keys).

    .venv/bin/conformance exec --transformers 5.25.0 [--vllm 0.34.0] -- \
        .venv/bin/python reports/confirm/backend_weight_keys.py CHECKPOINT_DIR

CHECKPOINT_DIR: a checkpoint folder (this project's tiny fixture of the model type, built under
the same transformers version, holds the layout transformers' own save_pretrained writes).
"""

import glob
import os
import sys
import types

import torch
import transformers
import vllm
from safetensors import safe_open
from vllm.model_executor.models.transformers.base import Base

path = sys.argv[1]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, "
      f"{os.path.basename(path.rstrip('/'))}")
config = transformers.AutoConfig.from_pretrained(path)
with torch.device("meta"):
    built = transformers.AutoModel.from_config(config)
holder = types.SimpleNamespace(model=built, config=config, quant_config=None,
                               _maybe_apply_model_mapping=lambda: None)
# vLLM 0.34.0's mapper also reads the backend's own _weight_conversions (a method of Base)
if hasattr(Base, "_weight_conversions"):
    holder._weight_conversions = types.MethodType(Base._weight_conversions, holder)
Base._create_hf_to_vllm_mapper(holder)
names = {f"model.{name}" for name, _ in built.named_parameters()}
keys = []
for file in sorted(glob.glob(os.path.join(path, "*.safetensors"))):
    with safe_open(file, "pt") as weights:
        keys += list(weights.keys())
unplaced = []
for key in sorted(keys):
    mapped = holder.hf_to_vllm_mapper._map_name(key)
    if mapped is not None and mapped not in names and not mapped.startswith("lm_head"):
        unplaced.append((key, mapped))
print(f"the backend builds {type(built).__name__}; {len(keys)} checkpoint keys, "
      f"{len(unplaced)} mapped to a name the built model lacks")
prefixes = {}
for key, mapped in unplaced:
    head = ".".join(key.split(".")[:3])
    prefixes.setdefault(head, (key, mapped, 0))
    prefixes[head] = (*prefixes[head][:2], prefixes[head][2] + 1)
for key, mapped, count in prefixes.values():
    print(f"  {key} -> {mapped} ({count} keys like it)")

architecture = config.architectures[0]
model_class = getattr(transformers, architecture)
model, info = model_class.from_pretrained(path, output_loading_info=True)
print(f"transformers' {architecture}.from_pretrained: missing {sorted(info['missing_keys'])[:5]}, "
      f"unexpected {sorted(info['unexpected_keys'])[:5]}")
