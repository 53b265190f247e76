"""Can vLLM's Transformers backend serve Kosmos-2, Kosmos-2.5 and VisionEncoderDecoderModel (TrOCR)?
(vLLM and transformers only)

    python image_prepending_unservable.py CHECKPOINT [CHECKPOINT ...]

CHECKPOINT (one per model type): microsoft/kosmos-2-patch14-224, microsoft/kosmos-2.5,
microsoft/trocr-base-handwritten, or this project's tiny ones (fixtures/recipes/kosmos2.py,
kosmos2_5.py, vision_encoder_decoder.py: not registered fixtures since the backend cannot serve
them), each built with
    .venv/bin/python -c "from pathlib import Path; from fixtures.build import write_checkpoint;
    from fixtures.recipes.NAME import RECIPE, make;
    write_checkpoint(RECIPE, make('tiny'), Path('/tmp/NAME'))"
(under `conformance exec --transformers V --` for another transformers version).

None of the three processors takes a placeholder from the user: Kosmos2Processor and
Kosmos2_5Processor write the image's tokens before the prompt themselves (and mark them in
`image_embeds_position_mask`), TrOCRProcessor sends the image to the encoder and the text to the
decoder. The backend needs, per image, a token count from the processor's
`_get_num_multimodal_tokens` (its profiling, so its engine) and the image's place in the prompt
from `mm_token_type_ids` (Legacy path, transformers < 5.15) or `text_replacement_offsets`
(Offsets path). Readings per checkpoint:
1. the config: model_type, architectures, whether vLLM counts it encoder-decoder, and the class
   vLLM's ModelConfig resolves (model_impl "auto": no native model, so the backend's), with its
   default runner and with runner "generate" (what readings 4 and 5 ask for);
2. the HF processor for a prompt and one image, asked for `return_mm_token_type_ids=True` and for
   `return_text_replacement_offsets=True`: the keys it returns, and whether its class defines
   `_get_num_multimodal_tokens`;
3. the HF model (the class the checkpoint names) generating 2 tokens greedily from it (the
   checkpoint works in transformers);
4. vLLM's engine (float32, one image per prompt): what starting it and generating raises;
5. what-if: the processor class given a `_get_num_multimodal_tokens` answering the image-token
   count it writes (1 for TrOCR, which writes none): what the engine raises next.
Exit 1 when no checkpoint is served with its image (reproduces); 0 when one is.
"""

import os
import sys
import traceback

import numpy as np
import torch
import transformers
import vllm
from PIL import Image
from transformers import AutoConfig, AutoProcessor

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
PROMPTS = {  # each model card's prompt
    "kosmos-2": "<grounding>An image of",
    "kosmos-2.5": "<ocr>",
    "vision-encoder-decoder": "",
}
image = Image.fromarray(np.random.RandomState(0).randint(0, 256, (40, 56, 3), dtype=np.uint8))
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")


def failure(error: BaseException) -> str:
    message = str(error).splitlines()[0] if str(error) else ""
    text = f"{type(error).__name__}: " + (repr(message) if len(message) <= 240 else
                                          f"{message[:160]!r} ... {message[-70:]!r}")
    frames = traceback.extract_tb(error.__traceback__)
    return text + (f" at {frames[-1].filename.split('site-packages/')[-1]}:{frames[-1].lineno}"
                   if frames else "")


def engine(path: str, prompt: str, max_len: int) -> str:
    try:
        llm = vllm.LLM(model=path, runner="generate", dtype="float32", max_model_len=max_len,
                       enforce_eager=True,
                       kv_cache_memory_bytes=1 << 26, limit_mm_per_prompt={"image": 1})
    except Exception as error:  # noqa: BLE001 - what it raises is the reading
        return f"engine start: {failure(error)}"
    try:
        out = llm.generate({"prompt": prompt, "multi_modal_data": {"image": [image]}},
                           vllm.SamplingParams(temperature=0.0, max_tokens=2),
                           use_tqdm=False)[0]
    except Exception as error:  # noqa: BLE001 - what it raises is the reading
        return f"engine started; generate: {failure(error)}"
    finally:
        del llm
    return (f"served: {len(out.prompt_token_ids)} prompt ids, generated "
            f"{list(out.outputs[0].token_ids)}")


served = False
for path in sys.argv[1:]:
    config = AutoConfig.from_pretrained(path)
    prompt = PROMPTS[config.model_type]
    from vllm.config import ModelConfig
    from vllm.transformers_utils.config import is_encoder_decoder

    max_len = min(512, getattr(config.get_text_config(), "max_position_embeddings", 512))
    resolved = []
    for runner in ("auto", "generate"):
        try:
            model_config = ModelConfig(model=path, runner=runner, dtype="float32",
                                       max_model_len=max_len)
            resolved.append(f"runner {runner}: {model_config.architecture} "
                            f"({model_config.runner_type})")
        except Exception as error:  # noqa: BLE001 - what it raises is the reading
            resolved.append(f"runner {runner}: {failure(error)}")
    print(f"\n== {config.model_type} ({path})")
    print(f"1. architectures {config.architectures}; vLLM is_encoder_decoder "
          f"{is_encoder_decoder(config)}; vLLM resolves, {'; '.join(resolved)}")

    # 2. the HF processor
    processor = AutoProcessor.from_pretrained(path)
    for ask in ("return_mm_token_type_ids", "return_text_replacement_offsets"):
        inputs = processor(text=prompt, images=[image], return_tensors="pt", **{ask: True})
        shapes = {k: list(v.shape) if hasattr(v, "shape") else type(v).__name__
                  for k, v in inputs.items()}
        print(f"2. {type(processor).__name__}({ask}=True) returns {shapes}")
    mask = inputs.get("image_embeds_position_mask")
    count = int((mask == 1).sum()) if mask is not None else 1
    print(f"2. {type(processor).__name__} defines _get_num_multimodal_tokens: "
          f"{hasattr(processor, '_get_num_multimodal_tokens')}; image tokens it writes: "
          f"{count if mask is not None else 'none (the image is the encoder input)'}")

    # 3. the HF model
    model_class = getattr(transformers, config.architectures[0])
    model = model_class.from_pretrained(path, dtype=torch.float32).eval()
    hf_inputs = processor(text=prompt or None, images=[image], return_tensors="pt")
    hf_inputs.pop("labels", None)
    with torch.inference_mode():
        generated = model.generate(**hf_inputs, max_new_tokens=2, do_sample=False)
    print(f"3. HF {model_class.__name__}.generate: {generated[0, -2:].tolist()} (last 2 ids)")
    del model

    # 4. the backend's engine
    reading = engine(path, prompt, max_len)
    print(f"4. backend engine: {reading}")
    served |= reading.startswith("served")

    # 5. what-if: the processor answers a token count
    cls = type(processor)
    cls._get_num_multimodal_tokens = lambda self, image_sizes=(), count=count, **kw: {
        "num_image_tokens": [count] * len(image_sizes),
        "num_image_patches": [1] * len(image_sizes),
    }
    reading = engine(path, prompt, max_len)
    print(f"5. what-if, {cls.__name__}._get_num_multimodal_tokens answering {count}: "
          f"backend engine: {reading}")
    del cls._get_num_multimodal_tokens
sys.exit(0 if served else 1)
