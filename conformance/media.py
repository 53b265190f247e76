"""Deterministic media for smoke checks: images of distinct sizes, audios of distinct lengths."""

from __future__ import annotations

import numpy as np

IMAGE_SIZES: tuple[tuple[int, int], ...] = ((40, 60), (64, 32), (50, 50), (30, 90))  # (h, w)
AUDIO_SECONDS: tuple[float, ...] = (1.0, 0.6, 1.4, 0.8)
SAMPLING_RATE = 16000


def make_images(count: int, seed: int = 0) -> list:
    from PIL import Image

    rng = np.random.RandomState(seed)
    sizes = [IMAGE_SIZES[i % len(IMAGE_SIZES)] for i in range(count)]
    return [Image.fromarray(rng.randint(0, 256, (h, w, 3), dtype=np.uint8)) for h, w in sizes]


def make_audios(count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.RandomState(seed)
    lengths = [int(AUDIO_SECONDS[i % len(AUDIO_SECONDS)] * SAMPLING_RATE) for i in range(count)]
    return [rng.uniform(-0.5, 0.5, n).astype(np.float32) for n in lengths]


def make_items(modality: str, count: int, seed: int = 0) -> list:
    if modality == "image":
        return make_images(count, seed)
    if modality == "audio":
        return make_audios(count, seed)
    raise ValueError(f"no media maker for modality {modality!r}")
