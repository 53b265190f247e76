"""Does vLLM's Transformers backend take video for a checkpoint, and does it expand a video
prompt as native vLLM does? (vLLM and transformers only; vLLM >= 0.32.0 enables video in the
backend on transformers >= 5.18.0.)

    python video_probe.py ARCH CHECKPOINT    # ARCH: qwen2_vl, qwen2_5_vl, qwen3_vl,
                                             #       llava_onevision, glm4v

Exit 0: both processors take the video and agree on prompt ids and the video's placeholder;
exit 1: they differ or one refuses (printed).
"""

import sys

import numpy as np
import transformers
import vllm
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY

PLACEHOLDER = {
    "qwen2_vl": "<|vision_start|><|video_pad|><|vision_end|>",
    "qwen2_5_vl": "<|vision_start|><|video_pad|><|vision_end|>",
    "qwen3_vl": "<|vision_start|><|video_pad|><|vision_end|>",
    "llava_onevision": "<video>",
    "glm4v": "<|begin_of_video|><|video|><|end_of_video|>",
}
arch, path = sys.argv[1], sys.argv[2]
frames = np.random.RandomState(0).randint(0, 256, (4, 56, 84, 3), dtype=np.uint8)
metadata = {"fps": 2.0, "duration": 2.0, "total_num_frames": 4, "frames_indices": [0, 1, 2, 3],
            "video_backend": "opencv", "do_sample_frames": False}
prompt = f"Watch {PLACEHOLDER[arch]} and tell."
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, {arch}")
seen = {}
for impl in ("vllm", "transformers"):
    try:
        config = ModelConfig(model=path, model_impl=impl, max_model_len=None,
                             limit_mm_per_prompt={"image": 1, "video": 1})
        processor = MULTIMODAL_REGISTRY.create_processor(config)
        limits = processor.info.get_supported_mm_limits()
        needs_metadata = getattr(processor.info.get_data_parser(), "video_needs_metadata", False)
        video = (frames, metadata) if needs_metadata else frames
        out = processor(prompt, processor.info.parse_mm_data({"video": [video]}))
    except Exception as error:  # noqa: BLE001 - what the probe reports
        print(f"{impl}: {type(error).__name__}: {' '.join(str(error).split())[:300]}")
        continue
    placeholders = out["mm_placeholders"].get("video", [])
    ranges = [(r.offset, r.length) for r in placeholders]
    embeds = [r.offset + i for r in placeholders
              for i in (range(r.length) if r.is_embed is None
                        else r.is_embed.nonzero().flatten().tolist())]
    seen[impl] = (list(out["prompt_token_ids"]), ranges, embeds)
    print(f"{impl}: modalities {sorted(limits)}, {len(out['prompt_token_ids'])} ids, "
          f"video ranges {ranges}, embedding positions {embeds}")
same = len(seen) == 2 and seen["vllm"] == seen["transformers"]
if len(seen) == 2 and seen["vllm"][1] != seen["transformers"][1]:
    print("video ranges differ; embedding positions",
          "equal" if seen["vllm"][2] == seen["transformers"][2] else "differ")
if len(seen) == 2 and seen["vllm"][0] != seen["transformers"][0]:
    ids_n, ids_b = seen["vllm"][0], seen["transformers"][0]
    first = next((i for i, (a, b) in enumerate(zip(ids_n, ids_b, strict=False)) if a != b),
                 min(len(ids_n), len(ids_b)))
    print(f"first differing id at {first}: native {ids_n[first:first + 5]} vs backend "
          f"{ids_b[first:first + 5]}")
print("backend agrees with native vLLM on the video prompt:", same)
sys.exit(0 if same else 1)

# Measured 2026-12-01, vLLM 0.32.0 (.venv-vllm-0.32.0) with the transformers 5.19.0 overlay on
# PYTHONPATH, on this project's tiny fixtures built for 5.19.0 (each video: 4 frames of 56x84):
#   vLLM 0.32.0, transformers 5.19.0, qwen2_5_vl
#   vllm: modalities ['image', 'video'], 18 ids, video ranges [(6, 4)]
#   transformers: modalities ['image', 'video'], 18 ids, video ranges [(6, 4)]
#   backend agrees with native vLLM on the video prompt: True
#   exit 0
#   vLLM 0.32.0, transformers 5.19.0, qwen3_vl
#   vllm: modalities ['image', 'video'], 44 ids, video ranges [(6, 30)]
#   transformers: modalities ['image', 'video'], 44 ids, video ranges [(6, 30)]
#   backend agrees with native vLLM on the video prompt: True
#   exit 0
#   vLLM 0.32.0, transformers 5.19.0, llava_onevision
#   vllm: modalities ['image', 'video'], 17 ids, video ranges [(5, 5)]
#   transformers: modalities ['image', 'video'], 17 ids, video ranges [(5, 5)]
#   backend agrees with native vLLM on the video prompt: True
#   exit 0
#   vLLM 0.32.0, transformers 5.19.0, glm4v
#   vllm: modalities ['image', 'video'], 22 ids, video ranges [(5, 10)],
#     embedding positions [7, 11]
#   transformers: modalities ['image', 'video'], 22 ids, video ranges [(6, 8)],
#     embedding positions [6, 10]
#   video ranges differ; embedding positions differ
#   backend agrees with native vLLM on the video prompt: False
#   exit 1
#   qwen2_vl (first run, same script before the embedding positions were printed):
#     vllm: modalities ['image', 'video'], 18 ids, video ranges [(6, 4)]
#     transformers: modalities ['image', 'video'], 18 ids, video ranges [(6, 4)]; agree: True
# glm4v, the ids around the video (both sides the same ids):
#   5 <|begin_of_video|> 6 <|begin_of_image|> 7 <|image|> 8 <|end_of_image|> 9 '0'
#   10 <|begin_of_image|> 11 <|image|> 12 <|end_of_image|> 13 '1' 14 <|end_of_video|>
# native vLLM embeds the video at 7 and 11 (<|image|>); the backend at 6 and 10
# (<|begin_of_image|>): its `_get_embed_token_id` takes the mode of the replacement ids, and with
# one <|image|> per frame group <|begin_of_image|> (id 10), <|image|> (14) and <|end_of_image|>
# (11) tie, and torch.mode returns the smallest. Real GLM-4V frames have many <|image|> tokens
# each, where the mode is right; the tiny fixture's frames are one token each. Not recorded as
# a finding: video is not in the matrix yet.
# Since video joined the suites (vLLM >= 0.32.0 on transformers >= 5.18): the same tie on
# Qwen3-VL is the finding video-embed-token-tie (reports/confirm/video_embed_token_tie.py);
# GLM-4V's videos are not drawn yet (fixtures/recipes/glm4v.py says why).
