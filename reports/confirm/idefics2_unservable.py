"""Does vLLM's Transformers backend process an Idefics2 image prompt? (vLLM and transformers only.)

    python idefics2_unservable.py CHECKPOINT

CHECKPOINT: HuggingFaceM4/idefics2-8b, or this project's tiny fixture (fixtures/recipes/
idefics2.py), e.g. the harness's built folder
~/.cache/vllm-mm-conformance/fixtures/idefics2-tiny-tf<version>-<digest>.

The backend locates each item's placeholder from what the HF processor returns: below
transformers 5.15 (Legacy path) from `mm_token_type_ids`, from 5.15 (Offsets path) from the
`text_replacement_offsets` ProcessorMixin writes in `get_text_with_replacements`.
Idefics2Processor has its own `__call__`, which expands <image> itself and returns neither; and
below 5.25 it defines no `_get_num_multimodal_tokens`, from which the backend sizes its image
budget before an engine starts. Readings, one 60x40 image:
1. transformers: the HF processor's output keys when asked for both (and whether it defines
   _get_num_multimodal_tokens);
2. the backend's processor (vLLM's multimodal registry) on the prompt;
3. the backend's image budget (what an engine asks first).
Exit 1 while the backend cannot process the image (reproduces).
"""

import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import transformers  # noqa: E402
import vllm  # noqa: E402
from PIL import Image  # noqa: E402
from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

path = sys.argv[1]
PROMPT = "User:<image>What is in this image?<end_of_utterance>\nAssistant:"
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 60, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

processor = transformers.AutoProcessor.from_pretrained(path)
try:
    out = processor(text=PROMPT, images=[image], return_text_replacement_offsets=True,
                    return_mm_token_type_ids=True)
    keys = f"keys {sorted(out.keys())}"
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    keys = f"{type(error).__name__}: {str(error)[:200]!r}"
print(f"1. {type(processor).__name__} asked for offsets and token types: {keys}; defines "
      f"_get_num_multimodal_tokens: {'_get_num_multimodal_tokens' in type(processor).__dict__}")

config = ModelConfig(model=path, model_impl="transformers", max_model_len=1024,
                     limit_mm_per_prompt={"image": 1})
print(f"2. vLLM resolves {config.architecture}")
mm = MULTIMODAL_REGISTRY.create_processor(config)
try:
    out = mm(PROMPT, mm.info.parse_mm_data({"image": [image]}), hf_processor_mm_kwargs={})
    reading, reproduces = f"processed: {len(out['prompt_token_ids'])} prompt ids", False
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    reading, reproduces = f"{type(error).__name__}: {str(error)[:300]!r}", True
print(f"   one image: {reading}")
try:
    budget = f"{mm.info.get_max_image_tokens()} tokens"
except Exception as error:  # noqa: BLE001 - what it raises is the reading
    budget = f"{type(error).__name__}: {str(error)[:200]!r}"
print(f"3. backend image budget: {budget}")
print("REPRODUCES: the backend cannot locate Idefics2's image placeholder" if reproduces
      else "DOES NOT REPRODUCE")
sys.exit(1 if reproduces else 0)
