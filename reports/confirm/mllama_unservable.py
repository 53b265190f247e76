"""Can vLLM's Transformers backend serve Mllama (Llama 3.2 Vision)? (vLLM and transformers only)

    .venv/bin/python reports/confirm/mllama_unservable.py CHECKPOINT

CHECKPOINT: meta-llama/Llama-3.2-11B-Vision-Instruct, or this project's tiny one
(fixtures/recipes/mllama.py, not a registered fixture since the backend cannot serve it), built
with
    .venv/bin/python -c "from pathlib import Path; from fixtures.build import write_checkpoint;
    from fixtures.recipes.mllama import RECIPE, make;
    write_checkpoint(RECIPE, make('tiny'), Path('/tmp/mllama'))"
(under `conformance exec --transformers V --` for another transformers version; `--vllm 0.34.0`
for vLLM 0.34.0). Mllama's image is one <|image|> token; the HF model reads the image through
its text model's cross-attention layers (cross_attention_states, cross_attention_mask), never
through the input embeddings. Readings:
1. transformers: what MllamaProcessor returns for a prompt and one image; the HF model's next
   token;
2. the model the backend builds (AutoModel of the config): whether it has get_image_features and
   what that returns (the backend's encoder step scatters its pooler_output into the image
   token's input embeddings);
3. the backend's multimodal processor: the image's placeholder range;
4. an engine (model_impl="transformers", float32): one greedy step with the image.
"""

import os
import sys

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
prompt = ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"
          "<|image|>What is this?<|eot_id|>")
inputs = hf(text=prompt, images=[image], return_tensors="pt", add_special_tokens=False)
shapes = {k: tuple(v.shape) for k, v in inputs.items()}
ids = inputs["input_ids"][0].tolist()
model = transformers.MllamaForConditionalGeneration.from_pretrained(path)
with torch.no_grad():
    top = model(**inputs).logits[0, -1].argmax().item()
print(f"1. {type(hf).__name__}: {shapes}; <|image|> tokens: {ids.count(hf.image_token_id)}; "
      f"the HF model's next token: {top}")

config = transformers.AutoConfig.from_pretrained(path)
with torch.device("meta"):
    built = transformers.AutoModel.from_config(config)
getter = getattr(built, "get_image_features", None)
print(f"2. the backend builds {type(built).__name__}; get_image_features: "
      f"{'none' if getter is None else 'defined'}; cross-attention layers "
      f"{config.text_config.cross_attention_layers}")
if getter is not None:
    try:
        out = model.model.get_image_features(
            **{k: v for k, v in inputs.items()
               if k in ("pixel_values", "aspect_ratio_ids", "aspect_ratio_mask")})
        pooled = getattr(out, "pooler_output", out)
        print(f"   HF get_image_features: {type(out).__name__}, pooler_output "
              f"{None if pooled is None else tuple(pooled.shape)}")
    except Exception as error:  # noqa: BLE001 - the exception itself is the result
        print(f"   HF get_image_features raised {one_line(error)}")

from vllm.config import ModelConfig  # noqa: E402
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402

try:
    mc = ModelConfig(model=path, model_impl="transformers", max_model_len=1024,
                     limit_mm_per_prompt={"image": 1})
    processor = MULTIMODAL_REGISTRY.create_processor(mc)
    out = processor(prompt, processor.info.parse_mm_data({"image": [image]}), {}, {})
    print(f"3. the backend's processor: image ranges {out['mm_placeholders']}")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    cause = error.__cause__ or error
    print(f"3. the backend's processor raised {one_line(error)}; caused by {one_line(cause)}")

try:
    llm = vllm.LLM(model=path, model_impl="transformers", dtype="float32", max_model_len=1024,
                   enforce_eager=True, limit_mm_per_prompt={"image": 1})
    result = llm.generate({"prompt": prompt, "multi_modal_data": {"image": image}},
                          vllm.SamplingParams(max_tokens=1, temperature=0.0))
    print(f"4. the engine served the image: next token {result[0].outputs[0].token_ids} "
          f"(the HF model's: {top})")
except Exception as error:  # noqa: BLE001 - the exception itself is the result
    print(f"4. the engine raised {one_line(error)}")
