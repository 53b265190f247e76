"""Can vLLM's Transformers backend build Voxtral's multimodal processor? (vLLM and transformers
only.)

    python voxtral_backend_processor.py CHECKPOINT    # a Voxtral checkpoint folder (tekken.json)

vLLM's registry builds the backend's processor as the engine does, loading VoxtralProcessor
through transformers. Up to 5.24 its loading passes the tekken tokenizer class keyword arguments
that `MistralCommonBackend.from_pretrained` refuses, which vLLM wraps in 'Failed to load the
processor'. Exit 1: it cannot be built (reproduces; the cause is printed).
"""

import os
import sys

import transformers
import vllm
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")
try:
    config = ModelConfig(model=path, model_impl="transformers", limit_mm_per_prompt={"audio": 1})
    hf = MULTIMODAL_REGISTRY.create_processor(config).info.get_hf_processor()
except RuntimeError as error:
    print(f"backend processor: {type(error).__name__}: {str(error).splitlines()[0][:80]}...; "
          f"cause: {error.__cause__!r}")
    sys.exit(1)
print(f"backend processor: {type(hf).__name__} built")
sys.exit(0)

# Measured 2026-12-03, vLLM 0.31.0 (.venv), on this project's tiny voxtral fixture built for
# each version:
#   transformers 5.24.0: backend processor: RuntimeError: Failed to load the processor. If the
#     processor is a custom processor not yet ava...;
#     cause: ValueError("Some kwargs in ['subfolder', 'tokenizer', '_from_auto', '_commit_hash']
#     are not supported by `MistralCommonBackend.from_pretrained`.")   (exit 1)
#   transformers 5.25.0: backend processor: VoxtralProcessor built   (exit 0)
