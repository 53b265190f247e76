"""Does vLLM's Transformers backend take two videos of different lengths in one LLaVA-OneVision
prompt, as native vLLM does? (vLLM and transformers only; vLLM >= 0.32.0 enables video in the
backend on transformers >= 5.18.0.)

    python llava_onevision_video_frames.py CHECKPOINT     # a LLaVA-OneVision checkpoint

Processes '<video><video>' with two videos of FRAMES[0] and FRAMES[1] frames (and, as a control,
two of FRAMES[1] frames) through native vLLM's processor and the backend's.
Exit 1: native takes the videos of different lengths and the backend raises (reproduces);
0: both take them alike.
"""

import sys

import numpy as np
import transformers
import vllm
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY

FRAMES = (1, 2)
SIDE = 16
path = sys.argv[1]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, {path}")


def videos(counts):
    rng = np.random.RandomState(0)
    out = []
    for n in counts:
        frames = rng.randint(0, 256, (n, SIDE, SIDE, 3), dtype=np.uint8)
        metadata = {"fps": 2.0, "duration": n / 2.0, "total_num_frames": n,
                    "frames_indices": list(range(n)), "video_backend": "opencv",
                    "do_sample_frames": False}
        out.append((frames, metadata))
    return out


def run(impl, counts):
    config = ModelConfig(model=path, model_impl=impl, limit_mm_per_prompt={"video": 2})
    processor = MULTIMODAL_REGISTRY.create_processor(config)
    data = processor.info.parse_mm_data({"video": videos(counts)})
    try:
        out = processor("<video><video>", data)
    except Exception as error:  # noqa: BLE001 - what the script reports
        cause = error.__cause__ or error
        print(f"  {impl:<12} frames {counts}: raises {type(error).__name__}; cause: "
              f"{type(cause).__name__}: {' '.join(str(cause).split())[:240]}")
        return None
    ranges = [(r.offset, r.length) for r in out["mm_placeholders"]["video"]]
    print(f"  {impl:<12} frames {counts}: {len(out['prompt_token_ids'])} ids, video ranges "
          f"{ranges}")
    return list(out["prompt_token_ids"]), ranges


same = [run(impl, (FRAMES[1], FRAMES[1])) for impl in ("vllm", "transformers")]
mixed = [run(impl, FRAMES) for impl in ("vllm", "transformers")]
print("control (equal lengths) agrees:", same[0] is not None and same[0] == same[1])
reproduces = mixed[0] is not None and mixed[1] is None
print("backend rejects videos of different lengths that native vLLM takes:", reproduces)
sys.exit(1 if reproduces else 0)

# Measured 2026-12-01, vLLM 0.32.0 (.venv-vllm-0.32.0) with the transformers 5.19.0 overlay on
# PYTHONPATH, on this project's tiny llava_onevision fixture built for 5.19.0 (exit 1):
#   vLLM 0.32.0, transformers 5.19.0, .../llava_onevision-tiny-tf5.19.0-66ac24679d5a
#     vllm         frames (2, 2): 6 ids, video ranges [(0, 3), (3, 3)]
#     transformers frames (2, 2): 6 ids, video ranges [(0, 3), (3, 3)]
#     vllm         frames (1, 2): 5 ids, video ranges [(0, 2), (2, 3)]
#     transformers frames (1, 2): raises ValueError; cause: ValueError: Unable to convert output
#       'pixel_values_videos' (type: list) to tensor: stack expects each tensor to be equal
#       size, but got [1, 3, 28, 28] at entry 0 and [2, 3, 28, 28] at entry 1 ...
#   control (equal lengths) agrees: True
#   backend rejects videos of different lengths that native vLLM takes: True
# Native vLLM's LlavaOnevisionMultiModalProcessor._call_hf_processor processes each video alone
# ("LLaVA-OneVision processor doesn't support multiple videos with different sizes when
# converting back to tensors"); the backend's processor calls the HF processor once.
