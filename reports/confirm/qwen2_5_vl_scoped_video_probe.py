"""Does a model-scoped option break Qwen2.5-VL on vLLM's Transformers backend? (vLLM and
transformers only.)

    python qwen2_5_vl_scoped_video_probe.py QWEN2_5_VL_CHECKPOINT [QWEN2_VL_CHECKPOINT]

The option given model-level and scoped by the modality of the items it is for, as vLLM takes
it: `LLM(mm_processor_kwargs={"images_kwargs": {"max_pixels": 784}})` with one 16x16 image, and
`{"videos_kwargs": {"max_pixels": 784}}` with one video of two 16x16 frames (given to vLLM with
its loader's metadata, every frame kept). For each:
1. Qwen2_5_VLProcessorKwargs._defaults before anything runs;
2. every `_get_num_multimodal_tokens` call the backend's processor makes while it is built and
   applied (its keyword arguments, the vLLM frames that made it), the class defaults'
   `videos_kwargs` after the build, then the backend's result on the prompt (its prompt ids and
   placeholder) or what it raises (message and cause);
3. the same option flat (`{"max_pixels": 784}`) through the backend, and the scoped option
   through native vLLM (model_impl="vllm");
4. transformers alone: the HF processor's count helper called as the backend's video probe calls
   it (`video_sizes=..., <group>={...}`), then the HF processor on the prompt;
5. with a second checkpoint, Qwen2-VL through the backend with the same scoped option.
Every reading starts from the option classes' defaults as transformers defines them.
Exit 1: the backend raises the TypeError of a group written into the defaults (reproduces).
"""

import copy
import sys
import traceback

import numpy as np
import transformers
import vllm
from PIL import Image
from transformers import AutoProcessor
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY

OPTIONS = {"max_pixels": 784}
RNG = np.random.RandomState(0)
# modality -> (its kwargs group, the prompt, its one item)
ITEMS = {
    "image": ("images_kwargs", "<|vision_start|><|image_pad|><|vision_end|>",
              Image.fromarray(RNG.randint(0, 256, (16, 16, 3), dtype=np.uint8))),
    "video": ("videos_kwargs", "<|vision_start|><|video_pad|><|vision_end|>",
              RNG.randint(0, 256, (2, 16, 16, 3), dtype=np.uint8)),
}
# what vLLM's video loader reports for two frames, every one kept (native vLLM requires it)
VIDEO_METADATA = {"fps": 2.0, "duration": 1.0, "total_num_frames": 2, "frames_indices": [0, 1],
                  "video_backend": "opencv", "do_sample_frames": False}
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

calls: list[str] = []


def watch(cls: type) -> None:
    """Record each call of `cls._get_num_multimodal_tokens` (observation only: it still runs)."""
    original = cls._get_num_multimodal_tokens

    def counted(self, *args, **kwargs):
        # the innermost vLLM frames that lead to the call: which of vLLM's steps makes it
        frames = [f"{f.filename.split('/vllm/', 1)[-1]}:{f.lineno} ({f.name})"
                  for f in traceback.extract_stack()[:-1] if "/vllm/" in f.filename][-3:]
        calls.append(f"{cls.__name__}._get_num_multimodal_tokens({kwargs}) from "
                     f"{' <- '.join(reversed(frames)) or 'no vLLM frame'}")
        return original(self, *args, **kwargs)

    cls._get_num_multimodal_tokens = counted


def short(error: BaseException) -> str:
    """The message on one line, a video's pixel dump left out (it names no cause)."""
    text = " ".join(str(error).split())
    head, sep, tail = text.partition(" with kwargs=")
    return f"{head[:110]} ...{sep}{tail}" if sep and len(head) > 110 else text


def backend(path: str, impl: str, modality: str, model_level: dict, kwargs_cls: type,
            pristine: dict) -> tuple[str, bool]:
    """The processor of `impl` given `model_level` options on `modality`'s prompt: what it
    gives or raises, and whether it raises the TypeError of a group in the defaults."""
    _, prompt, item = ITEMS[modality]
    kwargs_cls._defaults = copy.deepcopy(pristine)
    calls.clear()
    config = ModelConfig(model=path, model_impl=impl,
                         limit_mm_per_prompt={"image": 1, "video": 1},
                         mm_processor_kwargs=model_level)
    processor = MULTIMODAL_REGISTRY.create_processor(config)
    built = (f"after the build: _defaults['videos_kwargs'] = "
             f"{kwargs_cls._defaults.get('videos_kwargs')}")
    try:
        given = (item, VIDEO_METADATA) if modality == "video" else item
        out = processor(prompt, processor.info.parse_mm_data({modality: [given]}),
                        hf_processor_mm_kwargs={})
    except Exception as error:  # what the processor says is the evidence
        cause = error.__cause__ or error
        written = isinstance(cause, TypeError) and "merged_typed_dict" in str(cause)
        return (f"{built}\n    raises {type(error).__name__}: {short(error)}\n"
                f"    cause {type(cause).__name__}: {cause}"), written
    ranges = [(r.offset, r.length) for r in out["mm_placeholders"][modality]]
    return (f"{built}\n    {len(out['prompt_token_ids'])} prompt ids, {modality} (offset, "
            f"length) {ranges}"), False


def readings(modality: str, paths: list[str]) -> bool:
    from transformers.models.qwen2_5_vl import processing_qwen2_5_vl as q25
    from transformers.models.qwen2_vl import processing_qwen2_vl as q2

    group, prompt, item = ITEMS[modality]
    scoped = {group: dict(OPTIONS)}
    kwargs_cls = q25.Qwen2_5_VLProcessorKwargs
    pristine = copy.deepcopy(kwargs_cls._defaults)
    print(f"--- {modality}, mm_processor_kwargs={scoped}")
    print(f"1. Qwen2_5_VLProcessorKwargs._defaults: {pristine}")
    text, reproduces = backend(paths[0], "transformers", modality, scoped, kwargs_cls, pristine)
    print(f"2. backend, mm_processor_kwargs={scoped}:")
    for call in calls or ["none (no _get_num_multimodal_tokens call)"]:
        print(f"    call: {call}")
    print(f"    {text}")
    text, _ = backend(paths[0], "transformers", modality, OPTIONS, kwargs_cls, pristine)
    print(f"3. backend, mm_processor_kwargs={OPTIONS}:\n    {text}")
    text, _ = backend(paths[0], "vllm", modality, scoped, kwargs_cls, pristine)
    print(f"   native vLLM, mm_processor_kwargs={scoped}:\n    {text}")

    kwargs_cls._defaults = copy.deepcopy(pristine)
    hf = AutoProcessor.from_pretrained(paths[0])
    try:  # below 5.18 the video count itself fails (vLLM's backend does not ask it there)
        hf._get_num_multimodal_tokens(video_sizes=([2, 224, 224],), **scoped)
        counted = "counted"
    except Exception as error:
        counted = f"raises {type(error).__name__}: {error}"
    print(f"4. transformers alone, hf._get_num_multimodal_tokens(video_sizes=([2, 224, 224],), "
          f"{group}={OPTIONS}) {counted}; then _defaults['videos_kwargs'] = "
          f"{kwargs_cls._defaults.get('videos_kwargs')}")
    try:
        ids = hf(text=prompt, **{f"{modality}s": [item]})["input_ids"][0]
        print(f"   the HF processor on the {modality} prompt: {len(ids)} prompt ids")
    except TypeError as error:
        print(f"   the HF processor on the {modality} prompt: raises TypeError: {error}")
    kwargs_cls._defaults = copy.deepcopy(pristine)

    if len(paths) > 1:
        pristine2 = copy.deepcopy(q2.Qwen2VLProcessorKwargs._defaults)
        text, _ = backend(paths[1], "transformers", modality, scoped, q2.Qwen2VLProcessorKwargs,
                          pristine2)
        print(f"5. Qwen2-VL (Qwen2VLProcessorKwargs._defaults {pristine2}), backend, "
              f"mm_processor_kwargs={scoped}:")
        for call in calls or ["none (no _get_num_multimodal_tokens call)"]:
            print(f"    call: {call}")
        print(f"    {text}")
    return reproduces


def main() -> int:
    from transformers.models.qwen2_5_vl import processing_qwen2_5_vl as q25
    from transformers.models.qwen2_vl import processing_qwen2_vl as q2

    watch(q25.Qwen2_5_VLProcessor)
    watch(q2.Qwen2VLProcessor)
    found = [readings(modality, sys.argv[1:]) for modality in ITEMS]
    return 1 if any(found) else 0


if __name__ == "__main__":
    sys.exit(main())

# Measured 2026-12-04 (reports/confirm/qwen2_5_vl_scoped_video_probe.txt has the lines). vLLM
# 0.33.0 with transformers 5.19.0 and 5.20.2, vLLM 0.32.0 with 5.20.2: the backend's video probe
# (`_is_video_model` -> `_get_num_mm_tokens`, multimodal.py:125/:208) calls
# `Qwen2_5_VLProcessor._get_num_multimodal_tokens(video_sizes=([2, 224, 224],),
# images_kwargs={'max_pixels': 784})`; the helper updates `Qwen2_5_VLProcessorKwargs._defaults
# ["videos_kwargs"]` in place with its kwargs, which now holds `'images_kwargs': {...}`, and the
# first image request raises 'Failed to apply Qwen2_5_VLProcessor ... (cause TypeError:
# merged_typed_dict.__init__() got an unexpected keyword argument 'images_kwargs')'; scoped for
# video (`videos_kwargs`) the same with 'videos_kwargs' (exit 1). The same option flat and native
# vLLM with it scoped: 3 prompt ids, the item at (1, 1). transformers alone (reading 4) shows the
# write and the TypeError on 5.17.0 to 5.20.2. Not shown: vLLM 0.33.0 on 5.17.0 (the backend
# probes video from 5.18.0 only: no call), on 5.24.0 and 5.25.0 (the helper merges the options
# into a copy: nothing written); vLLM 0.31.0 on 5.20.2 (no video probe); Qwen2-VL anywhere
# (Qwen2VLProcessorKwargs._defaults has no `videos_kwargs`, so the helper updates a fresh dict).
