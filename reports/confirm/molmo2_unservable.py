"""Can vLLM's Transformers backend serve Molmo2? (vLLM and transformers only)

    python molmo2_unservable.py CHECKPOINT

CHECKPOINT: allenai/Molmo2-8B, or this project's tiny one (fixtures/recipes/molmo2.py, built under
`conformance exec --transformers 5.25.0 --`, transformers >= 5.20 having Molmo2).

transformers saves Molmo2 in the hub's own layout (conversion_mapping.py's "molmo2" entries, run
in reverse on save and forward on load): the text model under `transformer.blocks`, its q/k/v
fused in `att_proj`, its gate/up fused in `ff_proj`, the embedding split in `wte.embedding` and
`wte.new_embedding` (the additional vocabulary). Loading splits and concatenates them with
WeightConverters; the backend maps checkpoint names through transformers' renamings only.
Readings:
1. the checkpoint's stored names of text layer 0 and the embedding; transformers' conversion
   mapping for molmo2 (its WeightConverters);
2. transformers: the HF model loads the checkpoint and decodes one greedy token after an image;
   the HF processor's fields for two images (rows of pixel_values, image_token_pooling,
   image_grids) beside the crops per image its _get_num_multimodal_tokens gives, which the
   backend splits every field by;
3. vLLM with model_impl="transformers": the class it resolves and what loading raises.
Exit 1 when the backend cannot load the checkpoint (reproduces); 0 when it decodes.
"""

import gc
import os
import sys
import traceback

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from safetensors import safe_open
from transformers import AutoProcessor, Molmo2ForConditionalGeneration

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
path = sys.argv[1]
PROMPT = "<|im_start|>user\n<|image|>What is in this image?<|im_end|>\n<|im_start|>assistant\n"
rng = np.random.RandomState(0)
images = [Image.fromarray(rng.randint(0, 256, (h, w, 3), dtype=np.uint8))
          for h, w in ((40, 56), (100, 30))]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

# 1. stored names and transformers' conversion mapping
with safe_open(os.path.join(path, "model.safetensors"), "pt") as stored:
    names = sorted(k for k in stored.keys() if ".blocks.0." in k or ".wte." in k)
print(f"1. stored text names (layer 0, embedding): {names}")
from transformers.conversion_mapping import get_checkpoint_conversion_mapping  # noqa: E402

mapping = [m for key in ("molmo2", "Molmo2TextModel")
           for m in get_checkpoint_conversion_mapping(key) or []]
converters = [f"{m.source_patterns} -> {m.target_patterns}" for m in mapping
              if type(m).__name__ == "WeightConverter"]
print(f"1. transformers' molmo2 WeightConverters: {converters or 'none'}")

# 2. transformers
processor = AutoProcessor.from_pretrained(path)
model = Molmo2ForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
inputs = processor(text=PROMPT, images=images[:1], return_tensors="pt")
with torch.inference_mode():
    token = int(model(**inputs).logits[0, -1].argmax())
print(f"2. HF model loads; after one image it decodes token {token}; ids start "
      f"{inputs['input_ids'][0, :3].tolist()} (Molmo2Processor prepends "
      f"{processor.tokenizer.bos_token or processor.tokenizer.eos_token!r})")
two = processor(text=PROMPT.replace("<|image|>", "<|image|><|image|>"), images=images,
                return_tensors="pt")
crops = processor._get_num_multimodal_tokens(image_sizes=[(i.height, i.width) for i in images])
print(f"2. two images: pixel_values {list(two['pixel_values'].shape)}, image_token_pooling "
      f"{list(two['image_token_pooling'].shape)}, image_grids {two['image_grids'].tolist()}, "
      f"image_num_crops {two['image_num_crops'].tolist()}; num_image_patches "
      f"{crops['num_image_patches']}, num_image_tokens {crops['num_image_tokens']}")
del model
gc.collect()

# 3. vLLM's backend
reproduced = False
llm = None
try:
    from vllm.config import ModelConfig
    resolved = ModelConfig(model=path, model_impl="transformers", max_model_len=1024).architecture
    print(f"3. vLLM resolves {resolved}")
    llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
                   limit_mm_per_prompt={"image": 1}, enforce_eager=True,
                   kv_cache_memory_bytes=1 << 26)
    out = llm.generate([{"prompt": PROMPT, "multi_modal_data": {"image": images[:1]}}],
                       vllm.SamplingParams(temperature=0.0, max_tokens=1), use_tqdm=False)
    print(f"3. backend decodes token {out[0].outputs[0].token_ids[0]}")
except Exception as error:  # the engine may wrap the worker's error; its cause says it
    cause = error
    while cause.__cause__ is not None:
        cause = cause.__cause__
    frame = traceback.extract_tb(cause.__traceback__)[-1]
    where = f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno}"
    print(f"3. backend load: {type(cause).__name__}: {str(cause).splitlines()[0]} "
          f"(raised at {where})")
    reproduced = True
sys.exit(1 if reproduced else 0)
