"""Does vLLM's Transformers backend embed a video where native vLLM does when each frame group
holds a single embedding token? (vLLM and transformers only; vLLM >= 0.32.0 enables video in
the backend on transformers >= 5.18.0.)

    python video_embed_token_tie.py ARCH CHECKPOINT     # ARCH: qwen3_vl, glm4v

The backend takes the most frequent id of an item's replacement as its embedding token
(`_get_embed_token_id`: torch.mode, the smallest id on a tie). A video's replacement repeats,
per frame group, a start token, the embedding tokens, an end token (and a timestamp): with one
embedding token per group they tie. One video of two frames, SMALL (one token per group) and
LARGE (several, where the checkpoint's video processor allows: `LARGE` as HxW, default 64x64)
frames, through native vLLM's processor and the backend's.
Exit 1: the small video's embedding positions differ (reproduces; the large one's agreeing
shows the cause is the tie).
"""

import sys

import numpy as np
import transformers
import vllm
from vllm.config import ModelConfig
from vllm.multimodal import MULTIMODAL_REGISTRY

PLACEHOLDER = {
    "qwen3_vl": "<|vision_start|><|video_pad|><|vision_end|>",
    "glm4v": "<|begin_of_video|><|video|><|end_of_video|>",
}
SMALL = (16, 16)
LARGE = tuple(int(v) for v in sys.argv[3].split("x")) if len(sys.argv) > 3 else (64, 64)
arch, path = sys.argv[1], sys.argv[2]
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}, {arch}")
processors = {impl: MULTIMODAL_REGISTRY.create_processor(ModelConfig(
    model=path, model_impl=impl, limit_mm_per_prompt={"image": 1, "video": 1}))
    for impl in ("vllm", "transformers")}


def embeds(impl, size):
    frames = np.random.RandomState(0).randint(0, 256, (2, *size, 3), dtype=np.uint8)
    metadata = {"fps": 2.0, "duration": 1.0, "total_num_frames": 2, "frames_indices": [0, 1],
                "video_backend": "opencv", "do_sample_frames": False}
    processor = processors[impl]
    out = processor(f"Watch {PLACEHOLDER[arch]} now.",
                    processor.info.parse_mm_data({"video": [(frames, metadata)]}))
    ids = list(out["prompt_token_ids"])
    (r,) = out["mm_placeholders"]["video"]
    positions = [r.offset + i for i in (range(r.length) if r.is_embed is None
                                        else r.is_embed.nonzero().flatten().tolist())]
    print(f"  {impl:<12} frames {size}: range ({r.offset}, {r.length}), embedding positions "
          f"{positions[:8]} holding ids {sorted({ids[p] for p in positions})}")
    return positions


same = {size: embeds("vllm", size) == embeds("transformers", size) for size in (SMALL, LARGE)}
print("small frames agree:", same[SMALL], "| large frames agree:", same[LARGE])
sys.exit(1 if not same[SMALL] else 0)

# Measured 2026-12-01, vLLM 0.32.0 (.venv-vllm-0.32.0) with the transformers 5.19.0 overlay on
# PYTHONPATH, on this project's tiny fixtures built for 5.19.0:
#   vLLM 0.32.0, transformers 5.19.0, qwen3_vl                                      (exit 1)
#     vllm         frames (16, 16): range (6, 15), embedding positions [19] holding ids [13]
#     transformers frames (16, 16): range (6, 15), embedding positions [18] holding ids [9]
#     vllm         frames (64, 64): range (6, 15), embedding positions [19] holding ids [13]
#     transformers frames (64, 64): range (6, 15), embedding positions [18] holding ids [9]
#     small frames agree: False | large frames agree: False
#   (ids 9 <|vision_start|>, 10 <|vision_end|>, 13 <|video_pad|>; the tiny Qwen3-VL video
#   processor's budget, 64x64 pixels over the frames, never gives a group more than one token)
#   vLLM 0.32.0, transformers 5.19.0, glm4v                                         (exit 1)
#     vllm         frames (16, 16): range (5, 6), embedding positions [7] holding ids [14]
#     transformers frames (16, 16): range (6, 4), embedding positions [6] holding ids [10]
#     vllm         frames (64, 64): range (5, 9), embedding positions [7, 8, 9, 10] holding ids [14]
#     transformers frames (64, 64): range (6, 7), embedding positions [7, 8, 9, 10] holding ids [14]
#     small frames agree: False | large frames agree: True
#   GLM-4V's ranges differ even where the embeddings agree (native's covers <|begin_of_video|>
#   .. <|end_of_video|>): not yet drawn by the suites (see fixtures/recipes/glm4v.py).
