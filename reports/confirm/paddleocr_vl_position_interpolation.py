"""PaddleOCR-VL: how the vision tower resamples its learned position grid, in transformers and in
native vLLM (vLLM and transformers only)

    .venv/bin/conformance exec --transformers 5.14.1 -- \
        .venv/bin/python reports/confirm/paddleocr_vl_position_interpolation.py CHECKPOINT

CHECKPOINT: PaddlePaddle/PaddleOCR-VL, or this project's tiny paddleocr_vl fixture
(`conformance fixtures build --fixtures paddleocr_vl`, under the same transformers version).

The vision embeddings add a learned square grid of position embeddings (27x27 on the hub
checkpoint, 4x4 on the tiny one), resampled bilinearly to each image's patch grid. Readings:
1. transformers: the position embeddings PaddleOCRVisionEmbeddings adds for a 6x10 patch grid
   (its output for an all-zero image, less the patch embedding's bias), and which bilinear
   resampling of the learned grid they equal: align_corners True or False
   (torch.nn.functional.interpolate);
2. native vLLM: the same for vLLM's SiglipVisionEmbeddings.interpolate_pos_encoding (vLLM's own
   code, run on the checkpoint's learned grid);
3. the largest difference between the two.
Exit 1 when the two differ (the encoders' inputs disagree), 0 when they agree.
"""

import sys
from types import SimpleNamespace

import torch
import torch.nn.functional as F
import transformers
import vllm
from transformers import PaddleOCRVLForConditionalGeneration
from vllm.model_executor.models.paddleocr_vl import SiglipVisionEmbeddings

path = sys.argv[1]
H, W = 6, 10  # a patch grid other than the learned one's, neither a multiple nor a divisor
print(f"vLLM {vllm.__version__}, transformers {transformers.__version__}")

model = PaddleOCRVLForConditionalGeneration.from_pretrained(path, dtype=torch.float32).eval()
embeddings = model.model.visual.vision_model.embeddings
table = embeddings.position_embedding.weight.detach()
side = int(table.shape[0] ** 0.5)
patch = embeddings.patch_size
dim = table.shape[1]


def resampled(align_corners: bool) -> torch.Tensor:
    grid = table.reshape(1, side, side, dim).permute(0, 3, 1, 2)
    out = F.interpolate(grid, size=(H, W), mode="bilinear", align_corners=align_corners)
    return out.permute(0, 2, 3, 1).reshape(-1, dim)


def closest(found: torch.Tensor) -> str:
    gaps = {corners: (found - resampled(corners)).abs().max().item() for corners in (True, False)}
    return ", ".join(f"align_corners={c}: max abs {g:.3e}" for c, g in gaps.items())


with torch.inference_mode():
    pixels = torch.zeros(1, H * W, 3, patch, patch)
    out = embeddings(pixels, torch.tensor([[1, H, W]])).reshape(-1, dim)
    hf = out - embeddings.patch_embedding.bias
    print(f"1. transformers, learned grid {side}x{side} to {H}x{W}: against bilinear "
          f"resampling with {closest(hf)}")
    native = SiglipVisionEmbeddings.interpolate_pos_encoding(
        SimpleNamespace(position_embedding=embeddings.position_embedding, patch_size=patch),
        hf, H, W, True,
    ).reshape(-1, dim)
    print(f"2. native vLLM (SiglipVisionEmbeddings.interpolate_pos_encoding): against bilinear "
          f"resampling with {closest(native)}")
    gap = (hf - native).abs().max().item()
print(f"3. transformers vs native vLLM: max abs {gap:.3e}")
sys.exit(1 if gap > 1e-6 else 0)

# Measured 2026-12-04, vLLM 0.31.0 (.venv), CPU, on the tiny paddleocr_vl fixture built for
# each transformers version: see reports/confirm/paddleocr_vl_position_interpolation.txt.
