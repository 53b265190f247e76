#!/usr/bin/env python3
"""Confirms the qwen3_omni_moe_thinker cells' findings with vLLM and transformers only, on a
Qwen3-Omni thinker checkpoint (Qwen3OmniMoeThinkerForConditionalGeneration with its saved
Qwen3OmniMoeProcessor: the fixture built by fixtures/), served with model_impl="transformers":

1. What the backend needs of transformers, per version (qwen2-5-omni-thinker-backend-
   unservable-below-5-24's cause): AutoModel's mapping of `qwen3_omni_moe_thinker`, the
   processor's `_get_num_multimodal_tokens` and `replace_<modality>_token` hooks, and what the
   backend's processor raises for one image.
2. qwen2-5-omni-thinker-backend-mixed-drops-feature-mask: the fields of an audio item alone and
   beside an image.
3. qwen3-omni-moe-thinker-audio-batch-padding: Qwen3OmniMoeProcessor pads audio to the longest
   of the call (audio_kwargs padding=True), so an audio item's feature_attention_mask and
   input_features have its own frames alone and the longest neighbour's in a batch.
4. The image budget: the processor's token count for the 10000x10000 probe, 400x400 and 400x51
   (backend-image-budget-from-huge-probe).
5. One generation per prompt (text only, one image, one audio), each in a process of its own,
   through vLLM's backend and through the HF model: the backend calls the thinker's
   get_rope_index with input_ids and the grids only.

    .venv/bin/conformance exec --transformers 5.25.0 -- \\
        .venv/bin/python /abs/reports/confirm/qwen3_omni_moe_thinker_backend.py CHECKPOINT_DIR
"""

import os
import subprocess
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import transformers  # noqa: E402
from PIL import Image  # noqa: E402

IMAGE = "<|vision_start|><|image_pad|><|vision_end|>"
AUDIO = "<|audio_start|><|audio_pad|><|audio_end|>"
HEAD = "<|im_start|>user\n"
TAIL = "What is in these?<|im_end|>\n<|im_start|>assistant\n"
PROMPTS = {
    "text only": (HEAD + TAIL, {}),
    "image": (HEAD + IMAGE + TAIL, {"image": 1}),
    "audio": (HEAD + AUDIO + TAIL, {"audio": 1}),
}


def media(samples: int = 1600):
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), np.uint8))
    wave = np.random.default_rng(1).standard_normal(samples).astype(np.float32) * 0.1
    return image, wave


def one_line(error: BaseException) -> str:
    """The innermost cause, and where it was raised (file:line, function)."""
    import traceback

    while error.__cause__ is not None:
        error = error.__cause__
    frames = traceback.extract_tb(error.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        file = '/'.join(last.filename.split('/')[-3:])
        where = f" (at {file}:{last.lineno} {last.name}: {last.line})"
    return f"{type(error).__name__}: {str(error).splitlines()[0][:300]}{where}"


def generate_one(path: str, which: str, side: str) -> None:
    import torch

    prompt, counts = PROMPTS[which]
    image, wave = media()
    if side == "hf":
        processor = transformers.AutoProcessor.from_pretrained(path)
        thinker = transformers.Qwen3OmniMoeThinkerForConditionalGeneration
        model = thinker.from_pretrained(path).eval()
        kwargs = {}
        if counts.get("image"):
            kwargs["images"] = [image]
        if counts.get("audio"):
            kwargs["audio"] = [wave]
        inputs = processor(text=prompt, return_tensors="pt", **kwargs)
        with torch.inference_mode():
            ids = model.generate(**inputs, max_new_tokens=3, do_sample=False)
        print(f"  {which}: HF tokens {ids[0, inputs['input_ids'].shape[1]:].tolist()}")
        return
    from vllm import LLM, SamplingParams

    data = {}
    if counts.get("image"):
        data["image"] = image
    if counts.get("audio"):
        data["audio"] = (wave, 16000)
    try:
        llm = LLM(model=path, model_impl="transformers", max_model_len=2048, enforce_eager=True,
                  limit_mm_per_prompt={"image": 1, "audio": 1}, seed=0, max_num_seqs=1,
                  max_num_batched_tokens=2048, kv_cache_memory_bytes=2**26,
                  mm_processor_cache_gb=0)
        out = llm.generate({"prompt": prompt, "multi_modal_data": data},
                           SamplingParams(max_tokens=3, temperature=0.0), use_tqdm=False)
        print(f"  {which}: backend tokens {list(out[0].outputs[0].token_ids)}")
    except Exception as error:  # noqa: BLE001
        print(f"  {which}: backend failed {one_line(error)}")


def main(path: str) -> None:
    import vllm
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    processor = transformers.AutoProcessor.from_pretrained(path)
    print("vllm", vllm.__version__, "transformers", transformers.__version__,
          "processor", type(processor).__name__)
    print("1. AutoModel maps qwen3_omni_moe_thinker:",
          MODEL_MAPPING_NAMES.get("qwen3_omni_moe_thinker"),
          "| _get_num_multimodal_tokens:", hasattr(processor, "_get_num_multimodal_tokens"),
          "| defines replace_image_token / replace_audio_token:",
          [name in vars(type(processor))
           for name in ("replace_image_token", "replace_audio_token")])
    try:
        transformers.AutoModel.from_config(transformers.AutoConfig.from_pretrained(path))
        print("   AutoModel.from_config builds")
    except Exception as error:  # noqa: BLE001
        print("   AutoModel.from_config:", one_line(error)[:200])
    config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                         limit_mm_per_prompt={"image": 2, "audio": 2})
    mm = MULTIMODAL_REGISTRY.create_processor(config)
    image, wave = media()
    _, long_wave = media(1760)
    try:
        out = mm(HEAD + IMAGE + TAIL, mm.info.parse_mm_data({"image": [image]}))
        print("   backend processor, one image: placeholders",
              {m: [(p.offset, p.length) for p in ps] for m, ps in out["mm_placeholders"].items()})
    except Exception as error:  # noqa: BLE001
        print("   backend processor, one image:", one_line(error))
        try:
            print("   budget:", mm.info.get_mm_max_tokens_per_item(4096, {"image": 1}))
        except Exception as error2:  # noqa: BLE001
            print("   budget:", one_line(error2))
        return
    for label, prompt, data in (
        ("audio alone", HEAD + AUDIO + TAIL, {"audio": [(wave, 16000)]}),
        ("audio beside an image", HEAD + IMAGE + AUDIO + TAIL,
         {"image": [image], "audio": [(wave, 16000)]}),
    ):
        out = mm(prompt, mm.info.parse_mm_data(data))
        fields = {m: sorted(items[0].keys()) for m, items in out["mm_kwargs"].items()}
        print(f"2. {label}: fields {fields}")
    print("   feature extractor model_input_names:", processor.feature_extractor.model_input_names)
    # 3. audio padding: an item alone and beside a longer audio
    hf = processor(text=HEAD + AUDIO + AUDIO + TAIL, audio=[wave, long_wave], return_tensors="pt")
    alone = processor(text=HEAD + AUDIO + TAIL, audio=[wave], return_tensors="pt")
    padding = (processor._defaults['audio_kwargs'].get('padding')
               if hasattr(processor, '_defaults') else '?')
    print(f"3. HF processor (audio_kwargs padding default {padding}):"
          f" 1600 samples alone: feature_attention_mask"
          f" {list(alone['feature_attention_mask'].shape)}"
          f" input_features {list(alone['input_features'].shape)};"
          f" beside 1760 samples: feature_attention_mask {list(hf['feature_attention_mask'].shape)}"
          f" input_features {list(hf['input_features'].shape)}")
    for label, prompt, waves in (("alone", HEAD + AUDIO + TAIL, [wave]),
                                 ("in batch", HEAD + AUDIO + AUDIO + TAIL, [wave, long_wave])):
        out = mm(prompt, mm.info.parse_mm_data({"audio": [(w, 16000) for w in waves]}))
        item = out["mm_kwargs"]["audio"][0]
        shapes = {k: list(v.data.shape) for k, v in item.items() if hasattr(v.data, "shape")}
        print(f"   backend, audio item 0 (1600 samples) {label}: {shapes}")
    # 4. the image budget's probe
    count = processor._get_num_multimodal_tokens
    print("4. num_image_tokens for 10000x10000:",
          count(image_sizes=[[10000, 10000]]).num_image_tokens,
          "| 400x400:", count(image_sizes=[[400, 400]]).num_image_tokens,
          "| 400x51:", count(image_sizes=[[400, 51]]).num_image_tokens,
          "| backend budget:", mm.info.get_mm_max_tokens_per_item(4096, {"image": 1}))
    print("5. greedy generation, 3 tokens")
    for which in PROMPTS:
        for side in ("vllm", "hf"):
            done = subprocess.run([sys.executable, __file__, path, which, side],
                                  capture_output=True, text=True)
            lines = [line for line in done.stdout.splitlines() if line.startswith("  ")]
            print("\n".join(lines) if lines else f"  {which}: {side} exit {done.returncode} "
                  f"{done.stderr.strip().splitlines()[-1:]}")


if __name__ == "__main__":
    if len(sys.argv) == 4:
        generate_one(*sys.argv[1:])
    else:
        main(sys.argv[1])
