#!/usr/bin/env python3
"""Confirms the qwen2_5_omni_thinker findings with vLLM and transformers only, on a
Qwen2.5-Omni thinker checkpoint (Qwen2_5OmniThinkerForConditionalGeneration with its saved
Qwen2_5OmniProcessor: the fixture built by fixtures/), served with model_impl="transformers":

1. qwen2-5-omni-thinker-backend-unservable-below-5-24: what the backend needs of transformers,
   per version: AutoModel's mapping of `qwen2_5_omni_thinker` (its base model class,
   Qwen2_5OmniThinkerModel), the processor's `_get_num_multimodal_tokens` and its
   `replace_<modality>_token` hooks (text_replacement_offsets); and the message the backend's
   processor raises for one image.
2. qwen2-5-omni-thinker-backend-mixed-drops-feature-mask: the fields the backend's processor
   attributes to an audio item processed alone and beside an image: `feature_attention_mask`
   (the name Qwen2_5OmniProcessor gives the Whisper attention mask) is claimed by neither
   modality once both are present, as WhisperFeatureExtractor.model_input_names is only
   `input_features`.
3. qwen2-5-omni-thinker-backend-rope-index: one generation per prompt (text only, one image,
   one audio, image + audio), each in a process of its own, through vLLM's backend and through
   the HF model. The backend calls the thinker's get_rope_index with the image grid alone: no
   attention_mask (its branch without grids reads attention_mask.long()) and no audio_seqlens
   (its branch with grids reads audio_seqlens[i] at an audio span).
4. The image budget: the processor's token count for the 10000x10000 probe and for 400x400
   (backend-image-budget-from-huge-probe).
5. The HF processor's own error for two audio placeholders and one audio (below 5.24 its
   replace_multimodal_special_tokens calls next() on the audio lengths: a bare StopIteration).

    .venv/bin/conformance exec --transformers 5.25.0 -- \\
        .venv/bin/python reports/confirm/qwen2_5_omni_thinker_backend.py CHECKPOINT_DIR
"""

import os
import subprocess
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

import numpy as np  # noqa: E402
import transformers  # noqa: E402
from PIL import Image  # noqa: E402

IMAGE = "<|vision_bos|><|IMAGE|><|vision_eos|>"
AUDIO = "<|audio_bos|><|AUDIO|><|audio_eos|>"
HEAD = "<|im_start|>user\n"
TAIL = "What is in these?<|im_end|>\n<|im_start|>assistant\n"
PROMPTS = {
    "text only": (HEAD + TAIL, {}),
    "image": (HEAD + IMAGE + TAIL, {"image": 1}),
    "audio": (HEAD + AUDIO + TAIL, {"audio": 1}),
    "image + audio": (HEAD + IMAGE + AUDIO + TAIL, {"image": 1, "audio": 1}),
}


def media():
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (56, 56, 3), np.uint8))
    wave = np.random.default_rng(1).standard_normal(48000).astype(np.float32) * 0.1
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
        where = f" (at {'/'.join(last.filename.split('/')[-3:])}:{last.lineno} {last.name})"
    return f"{type(error).__name__}: {str(error).splitlines()[0][:300]}{where}"


def generate_one(path: str, which: str, side: str) -> None:
    """Reading 3 for one prompt: vLLM's backend or the HF model (after the backend has loaded,
    transformers' classes carry vLLM's compile decoration), greedy, 3 tokens."""
    import torch

    prompt, counts = PROMPTS[which]
    image, wave = media()
    if side == "hf":
        generate_hf(path, which, prompt, counts, image, wave, torch)
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


def generate_hf(path, which, prompt, counts, image, wave, torch) -> None:
    processor = transformers.AutoProcessor.from_pretrained(path)
    model = transformers.Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained(path).eval()
    kwargs = {}
    if counts.get("image"):
        kwargs["images"] = [image]
    if counts.get("audio"):
        kwargs["audio"] = [wave]
    inputs = processor(text=prompt, return_tensors="pt", **kwargs)
    with torch.inference_mode():
        ids = model.generate(**inputs, max_new_tokens=3, do_sample=False)
    print(f"  {which}: HF tokens {ids[0, inputs['input_ids'].shape[1]:].tolist()}"
          f" (HF forward passes attention_mask: {'attention_mask' in inputs},"
          f" feature_attention_mask: {'feature_attention_mask' in inputs})")


def main(path: str) -> None:
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    processor = transformers.AutoProcessor.from_pretrained(path)
    print("transformers", transformers.__version__, "processor", type(processor).__name__)
    # 1. what the backend needs of transformers
    print("1. AutoModel maps qwen2_5_omni_thinker:",
          MODEL_MAPPING_NAMES.get("qwen2_5_omni_thinker"),
          "| _get_num_multimodal_tokens:", hasattr(processor, "_get_num_multimodal_tokens"),
          "| Qwen2_5OmniProcessor defines replace_image_token / replace_audio_token:",
          [name in vars(type(processor))
           for name in ("replace_image_token", "replace_audio_token")],
          "(else ProcessorMixin's, which its __call__ never reaches)")
    try:
        transformers.AutoModel.from_config(transformers.AutoConfig.from_pretrained(path))
        print("   AutoModel.from_config builds")
    except Exception as error:  # noqa: BLE001
        print("   AutoModel.from_config:", one_line(error)[:160])
    config = ModelConfig(model=path, model_impl="transformers", max_model_len=4096,
                         limit_mm_per_prompt={"image": 1, "audio": 1})
    mm = MULTIMODAL_REGISTRY.create_processor(config)
    image, wave = media()
    # 5. two audio placeholders, one audio: the HF processor's own message
    try:
        processor(text=HEAD + AUDIO + AUDIO + TAIL, audio=[wave], return_tensors="pt")
        print("5. HF processor, 2 audio placeholders for 1 audio: accepted")
    except Exception as error:  # noqa: BLE001
        print("5. HF processor, 2 audio placeholders for 1 audio: raised",
              f"{type(error).__name__}: {error!s:.120}")
    try:
        out = mm(HEAD + IMAGE + TAIL, mm.info.parse_mm_data({"image": [image]}))
        print("   backend processor, one image: placeholders",
              {m: [(p.offset, p.length) for p in ps] for m, ps in out["mm_placeholders"].items()})
    except Exception as error:  # noqa: BLE001
        print("   backend processor, one image:", one_line(error))
        return
    # 2. the fields of an audio item alone and beside an image
    for label, prompt, data in (
        ("audio alone", HEAD + AUDIO + TAIL, {"audio": [(wave, 16000)]}),
        ("audio beside an image", HEAD + IMAGE + AUDIO + TAIL,
         {"image": [image], "audio": [(wave, 16000)]}),
    ):
        out = mm(prompt, mm.info.parse_mm_data(data))
        fields = {m: sorted(items[0].keys()) for m, items in out["mm_kwargs"].items()}
        print(f"2. {label}: fields {fields}")
    print("   HF processor output keys for audio:",
          sorted(processor(text=HEAD + AUDIO + TAIL, audio=[wave], return_tensors="pt").keys()),
          "| feature extractor model_input_names:",
          processor.feature_extractor.model_input_names)
    # 4. the image budget's probe
    count = processor._get_num_multimodal_tokens
    print("4. num_image_tokens for 10000x10000:",
          count(image_sizes=[[10000, 10000]]).num_image_tokens,
          "| 400x400:", count(image_sizes=[[400, 400]]).num_image_tokens,
          "| 400x51:", count(image_sizes=[[400, 51]]).num_image_tokens)
    # 3. one generation per prompt, each in a process of its own (a failed request ends the engine)
    print("3. greedy generation, 3 tokens")
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
